"""BEiT's two-view crop: one random resized crop, resized twice (backbone view and tokenizer view).

unilm ``beit/datasets.py`` (``DataAugmentationForBEiT``) and ``beit/transforms.py``
(``RandomResizedCropAndInterpolationWithTwoPic``): ColorJitter(0.4) and a horizontal flip act on the whole image, then
ONE crop box (scale 0.08-1, aspect ratio 3/4-4/3) is resized to 224 (bicubic) for the backbone and to 112 (lanczos)
for the dVAE tokenizer, so both views show the same content and token (i, j) of the tokenizer describes patch (i, j)
of the backbone view.

Pipeline (mmpretrain transforms where they serve)::

    LoadImageFromFile -> ColorJitter(0.4, 0.4, 0.4) -> RandomFlip(0.5, horizontal)
    -> beit_mm.TwoViewRandomResizedCrop(224, 112) -> beit_mm.BEiTMaskGenerator(14, 75) -> PackInputs

``PackInputs`` (mmpretrain) turns ``results['img'] = [view, tokenizer_view]`` into two CHW uint8 tensors and puts
``results['mask']`` into ``DataSample.mask``; ``beit_mm.MIMDataPreprocessor`` batches and normalizes them.

Differences to mmpretrain 1.2.0's ``RandomResizedCropAndInterpolationWithTwoPic``: its crop offsets exclude the last
position (``np.random.randint(0, H - h)``) and it rejects crops as large as the image (``w < W``); here both follow
unilm/torchvision (``randint(0, H - h)`` inclusive, ``w <= W``). The resize backend is Pillow as in unilm (mmpretrain
uses OpenCV, whose 'lanczos' is Lanczos-4 over 8x8 pixels, not Pillow's antialiased Lanczos-3).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform

from beit_mm.registry import TRANSFORMS

# torchvision / timm RandomResizedCrop: attempts to draw a box inside the image before the centre-crop fallback.
NUM_CROP_ATTEMPTS = 10


def _pair(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def check_crop_range(scale: Sequence[float], ratio: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A random resized crop's ``(scale, ratio)`` ranges as tuples.

    Raises:
        ValueError: ``scale`` is not ``0 < min <= max <= 1`` or ``ratio`` not ``0 < min <= max``.
    """
    if not 0 < scale[0] <= scale[1] <= 1:
        raise ValueError(f'scale={scale} must satisfy 0 < min <= max <= 1')
    if not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f'ratio={ratio} must satisfy 0 < min <= max')
    return tuple(scale), tuple(ratio)


def random_resized_crop_box(img_h: int,
                            img_w: int,
                            scale: tuple[float, float],
                            ratio: tuple[float, float],
                            rng: np.random.RandomState | np.random.Generator | None = None) -> tuple[int, ...]:
    """torchvision's ``RandomResizedCrop.get_params``: a box ``(top, left, height, width)`` inside the image.

    Area fraction ~ U(scale), aspect ratio w/h log-uniform in ``ratio``; after ``NUM_CROP_ATTEMPTS`` misses, the
    largest centred box with an aspect ratio inside ``ratio``.

    Args:
        img_h, img_w: image size in pixels.
        scale: range of the crop area as a fraction of the image area.
        ratio: range of the crop's width / height.
        rng: source of randomness; None = NumPy's global RNG (seeded per dataloader worker by MMEngine).
    """
    rng = np.random if rng is None else rng
    randint = rng.integers if isinstance(rng, np.random.Generator) else rng.randint
    area = img_h * img_w
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(NUM_CROP_ATTEMPTS):
        target_area = area * rng.uniform(*scale)
        aspect_ratio = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= img_w and 0 < h <= img_h:
            top = int(randint(0, img_h - h + 1))
            left = int(randint(0, img_w - w + 1))
            return top, left, h, w
    in_ratio = img_w / img_h
    if in_ratio < min(ratio):
        w, h = img_w, int(round(img_w / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = img_h, int(round(img_h * max(ratio)))
    else:
        w, h = img_w, img_h
    return (img_h - h) // 2, (img_w - w) // 2, h, w


@TRANSFORMS.register_module()
class TwoViewRandomResizedCrop(BaseTransform):
    """One random resized crop of ``results['img']`` resized to two sizes: ``results['img'] = [view, tokenizer_view]``.

    Required keys: ``img`` (H, W, 3) uint8. Modified: ``img`` -> list ``[(size_h, size_w, 3), (tok_h, tok_w, 3)]``,
    ``img_shape`` (of the first view). Added: ``crop_bbox`` ``(top, left, height, width)`` in the input image.

    Args:
        size: backbone view size (224 in BEiT).
        tokenizer_size: tokenizer view size (112 in BEiT: DALL-E's encoder downsamples by 8, giving the 14x14 grid of
            the 16-pixel patches of the 224 view).
        scale: crop area range as a fraction of the image (0.08-1 in BEiT).
        ratio: crop width/height range.
        interpolation: resize method of the backbone view ('bicubic' in BEiT).
        tokenizer_interpolation: resize method of the tokenizer view ('lanczos' in BEiT).
        backend: 'pillow' (unilm) or 'cv2' (mmpretrain).
    """

    def __init__(self,
                 size: int | tuple[int, int] = 224,
                 tokenizer_size: int | tuple[int, int] = 112,
                 scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bicubic',
                 tokenizer_interpolation: str = 'lanczos',
                 backend: str = 'pillow') -> None:
        scale, ratio = check_crop_range(scale, ratio)
        if backend not in ('pillow', 'cv2'):
            raise ValueError(f"backend={backend!r}; use 'pillow' (unilm) or 'cv2'")
        self.size = _pair(size)
        self.tokenizer_size = _pair(tokenizer_size)
        self.scale, self.ratio = scale, ratio
        self.interpolation = interpolation
        self.tokenizer_interpolation = tokenizer_interpolation
        self.backend = backend

    def transform(self, results: dict) -> dict:
        img = results['img']
        if not isinstance(img, np.ndarray) or img.ndim != 3:
            raise TypeError(f'TwoViewRandomResizedCrop expects results["img"] as an (H, W, C) ndarray, got '
                            f'{type(img).__name__}; put it right after LoadImageFromFile/ColorJitter/RandomFlip')
        top, left, h, w = random_resized_crop_box(img.shape[0], img.shape[1], self.scale, self.ratio)
        crop = img[top:top + h, left:left + w]
        # mmcv sizes are (w, h)
        view = mmcv.imresize(crop, self.size[::-1], interpolation=self.interpolation, backend=self.backend)
        tokenizer_view = mmcv.imresize(
            crop, self.tokenizer_size[::-1], interpolation=self.tokenizer_interpolation, backend=self.backend)
        results['img'] = [view, tokenizer_view]
        results['img_shape'] = view.shape[:2]
        results['crop_bbox'] = (top, left, h, w)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(size={self.size}, tokenizer_size={self.tokenizer_size}, '
                f'scale={self.scale}, ratio={self.ratio}, interpolation={self.interpolation!r}, '
                f'tokenizer_interpolation={self.tokenizer_interpolation!r}, backend={self.backend!r})')
