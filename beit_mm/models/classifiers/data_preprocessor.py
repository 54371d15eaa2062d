"""mmpretrain's ``ClsDataPreprocessor`` that first applies the RandAugment ops and the random erasing the samples carry.

Input: what mmpretrain's ``PackInputs`` gives, collated by ``default_collate`` or ``pseudo_collate``:
``data['inputs']`` (B, 3, H, W) uint8 BGR (or a list of (3, H, W)), ``data['data_samples']`` DataSamples whose
metainfo holds ``rand_augment`` and ``random_erasing`` when the train pipeline drew them
(``beit_mm.SampleRandAugment``, ``beit_mm.SampleRandomErasing``). Those are applied to the batch on the device, in
the exact pipeline's order (RandAugment, then erasing), before the BGR -> RGB flip, the normalization and the batch
augments (Mixup/CutMix) (:mod:`beit_mm.data.rand_augment`: tensor ops on a GPU, mmcv's own calls on a CPU).
Samples without them (validation, test, the exact train pipeline) pass through mmpretrain's preprocessing unchanged.

Where the samples carry ``crop_resize`` (``beit_mm.EncodedRandomResizedCrop``, collated by ``pseudo_collate``),
``data['inputs']`` holds each sample's JPEG bytes (1-D uint8) or decoded whole image ((3, H, W) RGB uint8), and the
crops are made here first, in the exact pipeline's order (:mod:`beit_mm.data.device_views`): the bytes decoded in one
batched ``decode_jpeg`` call, then per image the crop, Pillow's resize and the flip.
"""
from __future__ import annotations

import torch
from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor

from beit_mm.registry import MODELS

from ...data.cls_transforms import RAND_AUGMENT_KEY, RANDOM_ERASING_KEY
from ...data.device_views import decode_declared, resized_crops
from ...data.rand_augment import rand_augment, random_erasing

CROP_RESIZE_KEY = 'crop_resize'


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
        """Augment the images whose samples carry ops, then mmpretrain's ``ClsDataPreprocessor.forward``.

        Raises:
            ValueError: some samples of the batch carry ops and some do not, or the images are not uint8 of one
                size.
        """
        samples = data.get('data_samples') or []
        ops, erasing = _carried(samples, RAND_AUGMENT_KEY), _carried(samples, RANDOM_ERASING_KEY)
        crops = _carried(samples, CROP_RESIZE_KEY)
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
