"""mmseg's ``SegDataPreProcessor`` that first applies, on the device, the photometric distortion the samples carry."""
from __future__ import annotations

from mmseg.models.data_preprocessor import SegDataPreProcessor

from beit_mm.registry import MODELS

from ...data.transforms.photometric import SamplePhotoMetricDistortion, photometric_distortion


@MODELS.register_module()
class PhotoMetricSegDataPreProcessor(SegDataPreProcessor):
    """``SegDataPreProcessor`` (same arguments) that applies each sample's carried photometric distortion first."""

    def forward(self, data: dict, training: bool = False) -> dict:
        """Distort the crops whose samples carry parameters, then mmseg's preprocessing.

        Raises:
            ValueError: some samples of the batch carry a distortion and some do not.
        """
        data = self.cast_data(data)
        samples = data.get('data_samples') or []
        params = [s.metainfo.get(SamplePhotoMetricDistortion.key) for s in samples]
        if any(p is not None for p in params):
            if any(p is None for p in params) or len(params) != len(data['inputs']):
                raise ValueError('some samples of the batch carry a photometric_distortion to apply and some do not; '
                                 'use one train pipeline for the whole dataset')
            data['inputs'] = [photometric_distortion(image, p) for image, p in zip(data['inputs'], params)]
        return super().forward(data, training)
