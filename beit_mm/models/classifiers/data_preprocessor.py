"""mmpretrain's ``ClsDataPreprocessor`` that first applies the RandAugment ops and the random erasing the samples carry.

Input: what mmpretrain's ``PackInputs`` gives, collated by ``default_collate`` or ``pseudo_collate``:
``data['inputs']`` (B, 3, H, W) uint8 BGR (or a list of (3, H, W)), ``data['data_samples']`` DataSamples whose
metainfo holds ``rand_augment`` and ``random_erasing`` when the train pipeline drew them
(``beit_mm.SampleRandAugment``, ``beit_mm.SampleRandomErasing``). Those are applied to the batch on the device, in
the exact pipeline's order (RandAugment, then erasing), before the BGR -> RGB flip, the normalization and the batch
augments (Mixup/CutMix) (:mod:`beit_mm.data.rand_augment`). Samples without them (validation, test, the exact train
pipeline) pass through mmpretrain's preprocessing unchanged.
"""
from __future__ import annotations

import torch
from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor

from beit_mm.registry import MODELS

from ...data.cls_transforms import RAND_AUGMENT_KEY, RANDOM_ERASING_KEY
from ...data.rand_augment import rand_augment, random_erasing


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
        if ops is None and erasing is None:
            return super().forward(data, training)
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
