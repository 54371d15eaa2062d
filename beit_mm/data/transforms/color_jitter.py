"""ColorJitter drawn on the worker (:class:`SampleColorJitter`), applied to the batch on the device.

Each op is Pillow's ``ImageEnhance`` blend with a degenerate image (black; the whole image's grey
``int(luma mean + 0.5)``; the pixel's luma): ``clip(in1 + factor * (in2 - in1), 0, 255)`` in float32, truncated,
with luma ``(19595 R + 38470 G + 7471 B + 0x8000) >> 16``; equal to Pillow's pixel for pixel.
"""
from __future__ import annotations

import math
from collections import defaultdict

import cv2
import numpy as np
import torch
from mmcv.transforms import BaseTransform
from PIL import Image, ImageEnhance, ImageStat
from torch import Tensor

from beit_mm.registry import TRANSFORMS

LUMA_WEIGHTS = (19595, 38470, 7471)
LUMA_SHIFT = 16
BRIGHTNESS, CONTRAST, SATURATION, HUE = 0, 1, 2, 3
CONTRAST_MEAN_SIDE = 128
_ENHANCE = {BRIGHTNESS: ImageEnhance.Brightness, SATURATION: ImageEnhance.Color}


@TRANSFORMS.register_module()
class SampleColorJitter(BaseTransform):
    """Draws mmpretrain ``ColorJitter``'s parameters into ``results[key]`` without touching the pixels.

    Args:
        brightness, contrast, saturation: jitter strengths as mmpretrain's ``ColorJitter``.
        hue: must be 0 (the device-side jitter has no hue op).
    """

    key = 'color_jitter'

    def __init__(self, brightness: float = 0., contrast: float = 0., saturation: float = 0., hue: float = 0.) -> None:
        from mmpretrain.datasets.transforms import ColorJitter
        if hue:
            raise ValueError(f'SampleColorJitter(hue={hue}): the device-side jitter has no hue op; use hue=0, or the '
                             'exact pipeline (mmpretrain ColorJitter before the crop) for a hue jitter')
        self.reference = ColorJitter(brightness=brightness, contrast=contrast, saturation=saturation, hue=hue)
        self.brightness, self.contrast, self.saturation, self.hue = brightness, contrast, saturation, hue

    def transform(self, results: dict) -> dict:
        order, b, c, s, _ = self.reference._rand_params()
        results[self.key] = dict(order=[int(i) for i in order], brightness=b, contrast=c, saturation=s)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(brightness={self.brightness}, contrast={self.contrast}, '
                f'saturation={self.saturation}, hue={self.hue})')


def whole_image_contrast_mean(image: np.ndarray, jitter: dict, max_side: int = CONTRAST_MEAN_SIDE) -> int:
    """Pillow's contrast grey of the whole BGR ``image`` (at most ``max_side`` a side) after the ops before contrast."""
    height, width = image.shape[:2]
    factor = max(1, math.ceil(max(height, width) / max_side))
    if factor > 1:
        image = cv2.resize(image, (max(1, width // factor), max(1, height // factor)), interpolation=cv2.INTER_LINEAR)
    small = Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
    for op in jitter['order']:
        if op == CONTRAST:
            break
        value = jitter.get({BRIGHTNESS: 'brightness', SATURATION: 'saturation'}.get(op, ''))
        if op in _ENHANCE and value is not None:
            small = _ENHANCE[op](small).enhance(value)
    return int(ImageStat.Stat(small.convert('L')).mean[0] + 0.5)


def pil_luma(images: Tensor) -> Tensor:
    """Pillow's ``convert('L')``: (B, 3, H, W) RGB 0..255 (any dtype) -> (B, 1, H, W) int32 luma."""
    rgb = images.to(torch.int32)
    weights = torch.tensor(LUMA_WEIGHTS, dtype=torch.int32, device=images.device).view(1, 3, 1, 1)
    return ((rgb * weights).sum(1, keepdim=True) + (1 << (LUMA_SHIFT - 1))) >> LUMA_SHIFT


def pil_blend(degenerate: Tensor, images: Tensor, factor: Tensor) -> Tensor:
    """Pillow's ``Image.blend`` of (B, C, H, W) 0..255 ``images`` with ``degenerate`` by ``factor`` (B,); float32."""
    in1 = degenerate.to(torch.float32)
    alpha = factor.to(torch.float32).view(-1, 1, 1, 1)
    blended = (images.to(torch.float32) - in1) * alpha + in1
    return blended.clamp_(0.0, 255.0).floor_()


def adjust_brightness(images: Tensor, factor: Tensor) -> Tensor:
    return pil_blend(torch.zeros((), device=images.device), images, factor)


def adjust_saturation(images: Tensor, factor: Tensor) -> Tensor:
    return pil_blend(pil_luma(images), images, factor)


def adjust_contrast(images: Tensor, factor: Tensor, mean: Tensor) -> Tensor:
    """Pillow's ``ImageEnhance.Contrast(image).enhance(factor)`` per image, toward the grey ``mean`` (B,)."""
    return pil_blend(mean.to(torch.float32).view(-1, 1, 1, 1), images, factor)


def contrast_mean(images: Tensor) -> Tensor:
    """Pillow's contrast grey of whole images: ``int(mean(convert('L')) + 0.5)``. (B, 3, H, W) -> (B,) int64."""
    luma = pil_luma(images).to(torch.float64)
    return (luma.mean(dim=(1, 2, 3)) + 0.5).floor().to(torch.int64)


def color_jitter(images: Tensor, order: Tensor, brightness: Tensor, contrast: Tensor, saturation: Tensor,
                 mean: Tensor | None) -> Tensor:
    """mmpretrain's / torchvision's ColorJitter (hue 0) with per-image parameters, on a batch.

    Args:
        images: (B, 3, H, W) RGB, integer values 0..255 (uint8 or float), on any device.
        order: (B, 4) int on the CPU, each row a permutation of the op ids; hue (3) is skipped.
        brightness, contrast, saturation: (B,) factors on the CPU; NaN = the op is off for the image.
        mean: (B,) contrast grey per image on the CPU; None = each image's own.

    Returns:
        (B, 3, H, W) float32 on the device of ``images``, integer values 0..255.
    """
    out = images.to(torch.float32)
    device = out.device
    factors = {BRIGHTNESS: brightness, CONTRAST: contrast, SATURATION: saturation}
    for step in range(order.shape[1]):
        for op, factor in factors.items():
            index = ((order[:, step] == op) & ~torch.isnan(factor)).nonzero().flatten()
            if not index.numel():
                continue
            x, alpha = out[index.to(device)], factor[index].to(device)
            if op == BRIGHTNESS:
                x = adjust_brightness(x, alpha)
            elif op == CONTRAST:
                grey = contrast_mean(x) if mean is None else mean[index].to(device)
                x = adjust_contrast(x, alpha, grey)
            else:
                x = adjust_saturation(x, alpha)
            out[index.to(device)] = x
    return out


def stack_jitter_parameters(params: list[dict],
                            whole_images: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """The drawn ``params`` (one dict per image) as :func:`color_jitter`'s CPU tensors; ``mean`` None with
    ``whole_images``.

    Raises:
        ValueError: an image with a contrast factor but no ``contrast_mean`` (not ``whole_images``).
    """
    def factor(p: dict, key: str) -> float:
        return float('nan') if p.get(key) is None else float(p[key])
    for p in params:
        if not whole_images and p.get('contrast') is not None and 'contrast_mean' not in p:
            raise ValueError('a color_jitter with a contrast factor but no contrast_mean: put '
                             'beit_mm.DecodeTwoViewRandomResizedCrop (which computes it from the whole image) after '
                             'beit_mm.SampleColorJitter in the pipeline')
    order = torch.tensor([p['order'] for p in params], dtype=torch.int64)
    mean = None if whole_images else torch.tensor([int(p.get('contrast_mean', 0)) for p in params], dtype=torch.int64)
    return (order, *(torch.tensor([factor(p, k) for p in params], dtype=torch.float32)
                     for k in ('brightness', 'contrast', 'saturation')), mean)


def jitter_whole_images(images: list[Tensor], params: list[dict]) -> list[Tensor]:
    """mmpretrain's ``ColorJitter`` on B whole (3, H_i, W_i) RGB images with their drawn ``params``; B uint8 tensors."""
    groups = defaultdict(list)
    for i, image in enumerate(images):
        groups[tuple(image.shape)].append(i)
    out: list[Tensor | None] = [None] * len(images)
    for index in groups.values():
        order, brightness, contrast, saturation, _ = stack_jitter_parameters([params[i] for i in index],
                                                                           whole_images=True)
        jittered = color_jitter(torch.stack([images[i] for i in index]), order, brightness, contrast, saturation,
                                None).to(torch.uint8)
        for i, image in zip(index, jittered):
            out[i] = image
    return out
