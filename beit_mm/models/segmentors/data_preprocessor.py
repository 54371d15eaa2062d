"""mmseg's ``SegDataPreProcessor`` that first applies the photometric distortion the samples carry.

Input: what ``PackSegInputs`` gives, collated by ``pseudo_collate``: ``data['inputs']`` a list of (3, H, W) uint8
BGR crops, ``data['data_samples']`` SegDataSamples whose metainfo holds ``photometric_distortion`` when the train
pipeline drew it (``beit_mm.SamplePhotoMetricDistortion``). Each such crop is distorted on the device, as mmseg's
``PhotoMetricDistortion`` would have distorted it on the worker
(:func:`beit_mm.data.photometric.photometric_distortion`), before the BGR -> RGB flip, the normalization and the
padding (so padded pixels keep ``pad_val``). Samples without it (validation, test, the exact train pipeline) pass
through mmseg's preprocessing unchanged.
"""
from __future__ import annotations

from mmseg.models.data_preprocessor import SegDataPreProcessor

from beit_mm.registry import MODELS

from ...data.photometric import photometric_distortion
from ...data.seg_transforms import PHOTOMETRIC_KEY


@MODELS.register_module()
class PhotoMetricSegDataPreProcessor(SegDataPreProcessor):
    """``SegDataPreProcessor`` (same arguments) that applies each sample's carried photometric distortion first."""

    def forward(self, data: dict, training: bool = False) -> dict:
        """Distort the crops whose samples carry parameters, then mmseg's ``SegDataPreProcessor.forward``.

        Raises:
            ValueError: some samples of the batch carry a distortion and some do not.
        """
        data = self.cast_data(data)
        samples = data.get('data_samples') or []
        params = [s.metainfo.get(PHOTOMETRIC_KEY) for s in samples]
        if any(p is not None for p in params):
            if any(p is None for p in params) or len(params) != len(data['inputs']):
                raise ValueError('some samples of the batch carry a photometric_distortion to apply and some do not; '
                                 'use one train pipeline for the whole dataset')
            data['inputs'] = [photometric_distortion(image, p) for image, p in zip(data['inputs'], params)]
        return super().forward(data, training)
