"""The random resized crops: torchvision's box draw, the base the five crop transforms share, and BEiT's two-view crop.

BEiT's two-view crop resizes ONE box to the backbone view and the tokenizer view, so token (i, j) describes patch
(i, j).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmengine import fileio

from beit_mm.registry import TRANSFORMS

NUM_CROP_ATTEMPTS = 10


def pair(size: int | tuple[int, int]) -> tuple[int, int]:
    """``size`` as ``(height, width)``."""
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def check_crop_range(scale: Sequence[float], ratio: Sequence[float],
                     names: tuple[str, str] = ('scale', 'ratio')) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A random resized crop's ``(scale, ratio)`` ranges as tuples; ValueError when out of order."""
    if not 0 < scale[0] <= scale[1] <= 1:
        raise ValueError(f'{names[0]}={scale} must satisfy 0 < min <= max <= 1')
    if not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f'{names[1]}={ratio} must satisfy 0 < min <= max')
    return tuple(scale), tuple(ratio)


def random_resized_crop_box(img_h: int,
                            img_w: int,
                            scale: tuple[float, float],
                            ratio: tuple[float, float],
                            rng: np.random.RandomState | np.random.Generator | None = None) -> tuple[int, ...]:
    """torchvision's ``RandomResizedCrop.get_params``: a box ``(top, left, height, width)`` inside the image.

    Args:
        img_h, img_w: image size in pixels.
        scale, ratio: ranges of the crop's area fraction and of its width / height (log-uniform).
        rng: None = NumPy's global RNG.
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


class RandomResizedCropBase(BaseTransform):
    """The base of the random resized crops: argument checks, the file read and a ``__repr__`` of :attr:`fields`.

    A subclass sets :attr:`filters` (interpolations it applies; empty = any) and calls :meth:`check` in ``__init__``.
    """

    filters: tuple[str, ...] = ()
    filter_hint = ''
    fields: tuple[str, ...] = ()

    def check(self, area: Sequence[float], ratio: Sequence[float], interpolations: Sequence[str],
              flip_prob: float | None = None, backend_args: dict | None = None,
              names: tuple[str, str] = ('scale', 'ratio')) -> tuple[tuple, tuple]:
        """Store ``flip_prob`` and ``backend_args``; return ``(area, ratio)`` as tuples.

        Raises:
            ValueError: a range out of order, an interpolation not in :attr:`filters`, or ``flip_prob`` not in [0, 1].
        """
        for name in interpolations:
            if self.filters and name not in self.filters:
                raise ValueError(f'interpolation {name!r} is not one of {sorted(self.filters)}{self.filter_hint}')
        if flip_prob is not None and not 0 <= flip_prob <= 1:
            raise ValueError(f'flip_prob={flip_prob} must be in [0, 1]')
        self.flip_prob = flip_prob
        self.backend_args = None if backend_args is None else dict(backend_args)
        return check_crop_range(area, ratio, names)

    def set_views(self, size, tokenizer_size, interpolation: str, tokenizer_interpolation: str) -> None:
        """Store a two-view crop's output sizes ``(height, width)`` and interpolations."""
        self.size, self.tokenizer_size = pair(size), pair(tokenizer_size)
        self.interpolation, self.tokenizer_interpolation = interpolation, tokenizer_interpolation

    def read(self, results: dict) -> bytes:
        """The bytes of ``results['img_path']``."""
        return fileio.get(results['img_path'], backend_args=self.backend_args)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(' + ', '.join(f'{n}={getattr(self, n)!r}' for n in self.fields) + ')'


@TRANSFORMS.register_module()
class TwoViewRandomResizedCrop(RandomResizedCropBase):
    """One random resized crop of ``results['img']`` resized to two sizes: ``results['img'] = [view, tokenizer_view]``.

    Also sets ``img_shape`` and ``crop_bbox`` ``(top, left, height, width)``.

    Args:
        size, tokenizer_size: backbone and tokenizer view sizes.
        scale, ratio: crop area fraction and width/height ranges.
        interpolation, tokenizer_interpolation: resize methods of the two views.
        backend: 'pillow' (unilm) or 'cv2' (mmpretrain).
    """

    fields = ('size', 'tokenizer_size', 'scale', 'ratio', 'interpolation', 'tokenizer_interpolation', 'backend')

    def __init__(self,
                 size: int | tuple[int, int] = 224,
                 tokenizer_size: int | tuple[int, int] = 112,
                 scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bicubic',
                 tokenizer_interpolation: str = 'lanczos',
                 backend: str = 'pillow') -> None:
        self.scale, self.ratio = self.check(scale, ratio, ())
        if backend not in ('pillow', 'cv2'):
            raise ValueError(f"backend={backend!r}; use 'pillow' (unilm) or 'cv2'")
        self.set_views(size, tokenizer_size, interpolation, tokenizer_interpolation)
        self.backend = backend

    def transform(self, results: dict) -> dict:
        img = results['img']
        if not isinstance(img, np.ndarray) or img.ndim != 3:
            raise TypeError(f'TwoViewRandomResizedCrop expects results["img"] as an (H, W, C) ndarray, got '
                            f'{type(img).__name__}; put it right after LoadImageFromFile/ColorJitter/RandomFlip')
        top, left, h, w = random_resized_crop_box(img.shape[0], img.shape[1], self.scale, self.ratio)
        crop = img[top:top + h, left:left + w]
        view = mmcv.imresize(crop, self.size[::-1], interpolation=self.interpolation, backend=self.backend)
        tokenizer_view = mmcv.imresize(
            crop, self.tokenizer_size[::-1], interpolation=self.tokenizer_interpolation, backend=self.backend)
        results['img'] = [view, tokenizer_view]
        results['img_shape'] = view.shape[:2]
        results['crop_bbox'] = (top, left, h, w)
        return results
