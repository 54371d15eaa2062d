"""Batching and normalization of BEiT's two views and masks for masked image modeling.

Each sample brings ``[view (3, H, W), tokenizer_view (3, h, w)]`` uint8 (or its encoded image) and ``.mask``; colour
jitter and device-made views the samples carry are applied here. Output::

    inputs['images']          (B, 3, H, W) float32, (x - mean) / std after BGR -> RGB
    inputs['target_images']   (B, 3, h, w) float32 RGB 0..255
    inputs['mask']            (B, H/p, W/p) bool, True = masked
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.model import BaseDataPreprocessor
from torch import Tensor

from beit_mm.registry import MODELS

from ...data.transforms.color_jitter import (SampleColorJitter, color_jitter, jitter_whole_images,
                                              stack_jitter_parameters)
from ...data.transforms.device_views import decode_declared, two_views
from ...data.transforms.encoded import EncodedTwoViewRandomResizedCrop


def _stack(tensors: Sequence[Tensor], what: str) -> Tensor:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f'{what} of one batch have different shapes {sorted(shapes)}; the two-view crop must resize '
                         'every image to the same size (TwoViewRandomResizedCrop size/tokenizer_size)')
    return torch.stack(list(tensors))


@MODELS.register_module()
class MIMDataPreprocessor(BaseDataPreprocessor):
    """Two views + masks -> ``dict(images, target_images, mask)`` for BEiT masked image modeling.

    Args:
        mean, std: per-channel statistics of the backbone view (RGB order), in 0-255 pixels.
        to_rgb: flip BGR (``LoadImageFromFile``) to RGB for both views.
        non_blocking: non-blocking host-to-device copies.
    """

    def __init__(self,
                 mean: Sequence[float],
                 std: Sequence[float],
                 to_rgb: bool = True,
                 non_blocking: bool = False) -> None:
        super().__init__(non_blocking=non_blocking)
        if len(mean) != 3 or len(std) != 3:
            raise ValueError(f'mean and std need 3 values (RGB), got mean={mean}, std={std}')
        if any(s <= 0 for s in std):
            raise ValueError(f'std={std} must be positive')
        self.register_buffer('mean', torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1), persistent=False)
        self.to_rgb = to_rgb

    def _batch_views(self, inputs: Sequence) -> tuple[Tensor, Tensor]:
        """(views (B, 3, H, W), tokenizer views (B, 3, h, w)) from either collate layout."""
        if len(inputs) == 2 and all(isinstance(t, Tensor) and t.dim() == 4 for t in inputs):  # default_collate
            return inputs[0], inputs[1]
        if all(isinstance(s, (list, tuple)) and len(s) == 2 for s in inputs):  # pseudo_collate
            return _stack([s[0] for s in inputs], 'views'), _stack([s[1] for s in inputs], 'tokenizer views')
        raise ValueError('MIMDataPreprocessor expects data["inputs"] as per-sample [view, tokenizer_view] pairs or '
                         'two batched tensors; put beit_mm.TwoViewRandomResizedCrop before PackInputs in the pipeline')

    def _device_views(self, inputs: Sequence, samples: Sequence, jitter: list) -> tuple[Tensor, Tensor]:
        """(views, tokenizer views) RGB uint8 on the device from the packed bytes or images."""
        images = decode_declared(inputs, samples, self.mean.device, 'EncodedTwoViewRandomResizedCrop')
        if jitter[0] is not None:
            images = jitter_whole_images(images, jitter)
        resize = samples[0].metainfo[EncodedTwoViewRandomResizedCrop.key]
        return two_views(images, [s.crop_bbox for s in samples], [bool(s.flip) for s in samples], resize)

    def forward(self, data: dict, training: bool = False) -> dict:
        """See the module docstring for the layouts. ``training`` is unused: both modes normalize the same way."""
        samples = data.get('data_samples')
        if not samples or any(not hasattr(s, 'mask') for s in samples):
            raise ValueError('MIMDataPreprocessor needs data_samples with a .mask each; add beit_mm.BEiTMaskGenerator '
                             'before PackInputs in the pipeline')
        if not any(bool(torch.as_tensor(s.mask).any()) for s in samples):  # before the copy: no device sync
            raise ValueError('no position of the batch is masked, so the MIM loss is undefined; check the mask '
                             'generator (BEiTMaskGenerator num_masking_patches, or mask_ratio)')
        jitter = [s.metainfo.get(SampleColorJitter.key) for s in samples]
        if any(j is not None for j in jitter) and any(j is None for j in jitter):
            raise ValueError('some samples of the batch carry a color_jitter to apply and some do not; use one '
                             'train pipeline for the whole dataset')
        encoded = [s.metainfo.get(EncodedTwoViewRandomResizedCrop.key) is not None for s in samples]
        if any(encoded):
            if not all(encoded):
                raise ValueError('some samples of the batch carry encoded images (two_view_resize) and some do not; '
                                 'use one train pipeline for the whole dataset')
            views, tokenizer_views = self._device_views(data['inputs'], samples, jitter)
            samples = self.cast_data(samples)
        else:
            data = self.cast_data(data)
            views, tokenizer_views = self._batch_views(data['inputs'])
            samples = data['data_samples']
            if self.to_rgb:
                views, tokenizer_views = views.flip(1), tokenizer_views.flip(1)
            if jitter[0] is not None:
                params = stack_jitter_parameters(jitter)
                views, tokenizer_views = color_jitter(views, *params), color_jitter(tokenizer_views, *params)
        mask = _stack([torch.as_tensor(s.mask, device=views.device) for s in samples], 'masks').bool()
        images = (views.float() - self.mean) / self.std
        return dict(inputs=dict(images=images, target_images=tokenizer_views.float(), mask=mask), data_samples=samples)
