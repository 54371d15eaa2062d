"""mmpretrain's ``ClsDataPreprocessor`` that first applies, on the device, what the pipeline's samplers drew.

Device-made crops, RandAugment and random erasing run in the pipeline's order before mmpretrain's preprocessing;
samples without them pass through unchanged.
"""
from __future__ import annotations

import torch
from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor

from beit_mm.registry import MODELS

from ...data.transforms.device_views import decode_declared, resized_crops
from ...data.transforms.encoded import EncodedRandomResizedCrop
from ...data.transforms.rand_augment import SampleRandAugment, rand_augment
from ...data.transforms.random_erasing import SampleRandomErasing, random_erasing


def _carried(samples, key: str) -> list | None:
    """Each sample's ``key`` from its metainfo, or None when no sample carries it.

    Raises:
        ValueError: some samples carry it and some do not.
    """
    present = [key in s.metainfo for s in samples]
    if not any(present):
        return None
    if not all(present):
        raise ValueError(f'some samples of the batch carry a {key} to apply and some do not; use one train pipeline '
                         'for the whole dataset')
    return [s.metainfo[key] for s in samples]


@MODELS.register_module()
class AugmentClsDataPreprocessor(ClsDataPreprocessor):
    """``ClsDataPreprocessor`` (same arguments) that applies each sample's carried RandAugment and erasing first."""

    def forward(self, data: dict, training: bool = False) -> dict:
        """Augment the images whose samples carry ops, then mmpretrain's preprocessing.

        Raises:
            ValueError: ops carried by only some samples, or images not uint8 of one size.
        """
        samples = data.get('data_samples') or []
        ops, erasing = _carried(samples, SampleRandAugment.key), _carried(samples, SampleRandomErasing.key)
        crops = _carried(samples, EncodedRandomResizedCrop.key)
        if ops is None and erasing is None and crops is None:
            return super().forward(data, training)
        if crops is not None:
            inputs = self._device_crops(data['inputs'], samples, crops)
        else:
            inputs = self.cast_data(data['inputs'])
        if not isinstance(inputs, torch.Tensor):
            if len({tuple(t.shape) for t in inputs}) != 1:
                raise ValueError('RandAugment on the device needs the images of a batch at one size; crop them to '
                                 'one size in the train pipeline (RandomResizedCrop) before PackInputs')
            inputs = torch.stack(list(inputs))
        if inputs.dtype != torch.uint8:
            raise ValueError(f'RandAugment on the device takes the uint8 images PackInputs makes, got {inputs.dtype}')
        if ops is not None:
            inputs = rand_augment(inputs, ops)
        if erasing is not None:
            inputs = random_erasing(inputs, erasing)
        return super().forward(dict(data, inputs=inputs), training)

    def _device_crops(self, inputs, samples, crops: list[dict]) -> torch.Tensor:
        """(B, 3, h, w) uint8 BGR crops on this preprocessor's device from the packed bytes or whole images."""
        if len({(tuple(c['size']), c['interpolation']) for c in crops}) != 1:
            raise ValueError('the samples of the batch ask for different crop sizes or filters; use one train '
                             'pipeline for the whole dataset')
        images = decode_declared(inputs, samples, self.device, 'EncodedRandomResizedCrop')
        size, interpolation = tuple(crops[0]['size']), crops[0]['interpolation']
        views = resized_crops(images, [s.crop_bbox for s in samples], [(size, interpolation)])[0]
        flips = torch.tensor([bool(s.flip) for s in samples], device=views.device).view(-1, 1, 1, 1)
        views = torch.where(flips, views.flip(-1), views)
        return views.flip(1)  # RGB -> BGR: the ops and the fill colours are mmpretrain's, on BGR images
