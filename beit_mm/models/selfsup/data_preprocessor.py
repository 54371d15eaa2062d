"""Batching and normalization of BEiT's two views and masks for masked image modeling.

Input (what ``TwoViewRandomResizedCrop`` + ``BEiTMaskGenerator`` + mmpretrain ``PackInputs`` produce, collated by
MMEngine's ``pseudo_collate`` or ``default_collate``)::

    data['inputs']       per sample [view (3, H, W) uint8, tokenizer_view (3, h, w) uint8]   (pseudo_collate)
                         or [views (B, 3, H, W), tokenizer_views (B, 3, h, w)]             (default_collate)
    data['data_samples'] list of B DataSample with ``.mask`` (H/p, W/p) bool, True = masked, and, from the draft
                         pipeline (``beit_mm.SampleColorJitter`` + ``beit_mm.DecodeTwoViewRandomResizedCrop``), the
                         ColorJitter still to apply in their metainfo ``color_jitter``

Where the samples carry ``color_jitter`` (all or none of a batch), both views get it here, batched on the device after
BGR -> RGB and before the normalization (:func:`beit_mm.data.transforms.color_jitter.color_jitter`: Pillow's enhancements, the
drawn order and factors, the contrast grey of the whole image).

Where the samples carry ``two_view_resize`` (``beit_mm.EncodedTwoViewRandomResizedCrop``, collated by
``pseudo_collate``), ``data['inputs']`` holds each sample's JPEG bytes (1-D uint8) or decoded whole image
((3, H, W) RGB uint8) and the views are made here, on the preprocessor's device
(:mod:`beit_mm.data.transforms.device_views`): the bytes decoded in one batched ``decode_jpeg`` call, then the jitter on the whole
image, the flip, the crop and the two resizes, as the exact pipeline orders them. These views are RGB already
(``to_rgb`` applies to decoded BGR views only).

Output (``BEiTPretrain.forward(inputs, data_samples)``)::

    inputs['images']          (B, 3, H, W) float32, (x - mean) / std after BGR -> RGB (BEiT: mean = std = 127.5,
                              i.e. [-1, 1])
    inputs['target_images']   (B, 3, h, w) float32 RGB in the tokenizer's pixel space, ``target_pixels``:
                              'dalle': map_pixels(x / 255) in [0.1, 0.9] (DALL-E's logit-Laplace eps; mmpretrain
                              writes the same map as second_mean=-31.875, second_std=318.75);
                              'raw': x in [0, 255] (BEiT v2's VQ-KD, which maps x / 127.5 - 1 itself; unilm
                              beit2/datasets.py hands it ToTensor()'s [0, 1] and modeling_vqkd.py rescales)
    inputs['mask']            (B, H/p, W/p) bool, True = masked
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.model import BaseDataPreprocessor
from torch import Tensor

from beit_mm.registry import MODELS

from ...data.transforms.color_jitter import SampleColorJitter, color_jitter, stack_jitter_parameters
from ...data.transforms.device_views import decode_declared, jitter_whole_images, two_views
from ...data.transforms.encoded import EncodedTwoViewRandomResizedCrop
from ..tokenizers.dalle import map_pixels

# 8-bit pixels: the tokenizer's map_pixels takes [0, 1].
MAX_PIXEL_VALUE = 255.0
# how the tokenizer view is handed to the target generator (see the module docstring)
TARGET_PIXELS = ('dalle', 'raw')


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
        mean: per-channel mean of the backbone view (RGB order), in 0-255 pixels.
        std: per-channel std of the backbone view.
        to_rgb: flip BGR (``LoadImageFromFile``) to RGB for both views.
        target_pixels: pixel space of ``target_images``: ``'dalle'`` (BEiT v1's DALL-E dVAE: map_pixels(x / 255))
            or ``'raw'`` (BEiT v2's VQ-KD: float 0..255).
        non_blocking: non-blocking host-to-device copies.
    """

    def __init__(self,
                 mean: Sequence[float],
                 std: Sequence[float],
                 to_rgb: bool = True,
                 target_pixels: str = 'dalle',
                 non_blocking: bool = False) -> None:
        super().__init__(non_blocking=non_blocking)
        if len(mean) != 3 or len(std) != 3:
            raise ValueError(f'mean and std need 3 values (RGB), got mean={mean}, std={std}')
        if target_pixels not in TARGET_PIXELS:
            raise ValueError(f"target_pixels={target_pixels!r}; use 'dalle' (DALL-E dVAE tokenizer, BEiT v1) or "
                             "'raw' (VQ-KD tokenizer, BEiT v2)")
        self.target_pixels = target_pixels
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
        """(views, tokenizer views) RGB uint8 on this preprocessor's device from the packed bytes or whole images
        (the module docstring)."""
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
        target_images = tokenizer_views.float()
        if self.target_pixels == 'dalle':
            target_images = map_pixels(target_images / MAX_PIXEL_VALUE)
        return dict(inputs=dict(images=images, target_images=target_images, mask=mask), data_samples=samples)
