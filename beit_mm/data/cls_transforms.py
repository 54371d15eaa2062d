"""mmpretrain's ``RandAugment`` and ``RandomErasing`` drawn on the worker, applied by the data preprocessor.

``SampleRandAugment`` and ``SampleRandomErasing`` make exactly the NumPy draws mmpretrain 1.2's transforms make, in
their order (``RandAugment.random_policy_indices``; each chosen op's ``random_disable``, ``random_magnitude`` and
``random_negative`` as its ``transform`` calls them; ``RandomErasing.random_disable`` and ``random_patch``), and
record what was drawn in ``results`` instead of changing the pixels: ``rand_augment`` (the ops that were not
disabled, each with its parameters; for ``Rotate``/``Shear``/``Translate`` the inverse matrix ``cv2.warpAffine``
computes from mmcv's) and ``random_erasing`` (the box and fill, or None). ``beit_mm.AugmentClsDataPreprocessor``
applies them to the batch on its device (:mod:`beit_mm.data.rand_augment`), where the per-pixel work runs.

The one draw that is not made here is ``RandomErasing``'s per-pixel noise (``mode='rand'``): it is drawn on the device
from torch's RNG, so after an erased image a worker's NumPy stream is no longer the exact pipeline's (the next draws
have the same distribution, not the same values).
"""
from __future__ import annotations

import math

import cv2
import numpy as np
from mmcv.transforms import BaseTransform

from beit_mm.registry import TRANSFORMS

from .warp_affine import inverse_affine

RAND_AUGMENT_KEY = 'rand_augment'
RANDOM_ERASING_KEY = 'random_erasing'


def _pad(value) -> tuple[int, int, int]:
    """mmcv's pad value (one int or one per channel) as a BGR triple."""
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * 3


def _signed(op, value: float | None) -> float:
    """``op.random_negative(value if given else op.random_magnitude())``, as mmpretrain's ops call them."""
    return op.random_negative(op.random_magnitude() if value is None else value)


def _unsigned(op, value: float | None) -> float:
    """``value if given else op.random_magnitude()`` (the ops whose magnitude has no sign)."""
    return op.random_magnitude() if value is None else value


def _warp(op, matrix) -> dict:
    """A geometric op's record: the inverse of mmcv's matrix as ``cv2.warpAffine`` computes it, and the pad colour."""
    return dict(type=type(op).__name__, inverse=inverse_affine(matrix), pad_val=_pad(op.pad_val))


def _rotate(op, img_shape) -> dict:
    # mmcv.imrotate: centre ((w - 1) / 2, (h - 1) / 2), cv2.getRotationMatrix2D(center, -angle, scale)
    h, w = img_shape
    angle = _signed(op, op.angle)
    center = ((w - 1) * 0.5, (h - 1) * 0.5) if op.center is None else tuple(op.center)
    return _warp(op, cv2.getRotationMatrix2D(center, -angle, op.scale))


def _shear(op, img_shape) -> dict:
    m = _signed(op, op.magnitude)  # mmcv._get_shear_matrix (float32)
    matrix = np.float32([[1, m, 0], [0, 1, 0]] if op.direction == 'horizontal' else [[1, 0, 0], [m, 1, 0]])
    return _warp(op, matrix)


def _translate(op, img_shape) -> dict:
    m = _signed(op, op.magnitude)  # mmpretrain Translate: offset = magnitude * width (or height), float32 matrix
    h, w = img_shape
    matrix = (np.float32([[1, 0, m * w], [0, 1, 0]]) if op.direction == 'horizontal'
              else np.float32([[1, 0, 0], [0, 1, m * h]]))
    return _warp(op, matrix)


def _drawers() -> dict:
    """mmpretrain op class -> ``f(op, img_shape)`` making that op's draws after ``random_disable``."""
    from mmpretrain.datasets.transforms import auto_augment as aa

    def plain(op, img_shape):
        return dict(type=type(op).__name__)

    def factor(op, img_shape):  # Contrast, ColorTransform, Brightness, Sharpness: factor = 1 + magnitude
        return dict(type=type(op).__name__, factor=1 + _signed(op, op.magnitude))

    return {
        aa.AutoContrast: plain, aa.Equalize: plain, aa.Invert: plain,
        aa.Rotate: _rotate, aa.Shear: _shear, aa.Translate: _translate,
        aa.Posterize: lambda op, s: dict(type='Posterize', bits=int(math.ceil(_unsigned(op, op.bits)))),
        aa.Solarize: lambda op, s: dict(type='Solarize', thr=float(_unsigned(op, op.thr))),
        aa.SolarizeAdd: lambda op, s: dict(type='SolarizeAdd', magnitude=float(_unsigned(op, op.magnitude)),
                                           thr=float(op.thr)),
        aa.ColorTransform: factor, aa.Contrast: factor, aa.Brightness: factor, aa.Sharpness: factor,
    }


@TRANSFORMS.register_module()
class SampleRandAugment(BaseTransform):
    """mmpretrain ``RandAugment``'s draws without touching the pixels: ``results['rand_augment']``, the chosen ops
    that were not disabled, in order, each ``dict(type, **parameters)``.

    Args:
        policies, num_policies, magnitude_level, magnitude_std, total_level, hparams: as mmpretrain's
            ``RandAugment``. The geometric ops must interpolate bicubically (the tensor warp is OpenCV's bicubic).

    Raises:
        ValueError: a policy with no tensor implementation, or a geometric op with another interpolation.
    """

    def __init__(self, policies, num_policies: int, magnitude_level: float, magnitude_std=0., total_level: float = 10,
                 hparams: dict | None = None) -> None:
        from mmpretrain.datasets.transforms import RandAugment
        self.reference = RandAugment(policies=policies, num_policies=num_policies, magnitude_level=magnitude_level,
                                     magnitude_std=magnitude_std, total_level=total_level,
                                     hparams=dict(pad_val=128) if hparams is None else dict(hparams))
        drawers = _drawers()
        self.drawers = []
        for op in self.reference.transforms:
            if type(op) not in drawers:
                raise ValueError(f'SampleRandAugment: no device-side {type(op).__name__}; use mmpretrain RandAugment '
                                 'on the worker (the exact pipeline) for this policy')
            if getattr(op, 'interpolation', 'bicubic') != 'bicubic':
                raise ValueError(f"SampleRandAugment: {type(op).__name__}(interpolation={op.interpolation!r}); the "
                                 "device-side warp is OpenCV's bicubic: set hparams=dict(interpolation='bicubic')")
            self.drawers.append(drawers[type(op)])

    def transform(self, results: dict) -> dict:
        img_shape = tuple(results['img_shape'][:2])
        ops = []
        for i in self.reference.random_policy_indices():
            op = self.reference.transforms[i]
            if not op.random_disable():
                ops.append(self.drawers[i](op, img_shape))
        results[RAND_AUGMENT_KEY] = ops
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.reference!r})'


@TRANSFORMS.register_module()
class SampleRandomErasing(BaseTransform):
    """mmpretrain ``RandomErasing``'s box draws without touching the pixels: ``results['random_erasing']`` is None
    (not erased) or ``dict(box=(top, left, h, w), mode, fill_color, fill_std)``.

    Args:
        erase_prob, min_area_ratio, max_area_ratio, aspect_range, mode, fill_color, fill_std: as mmpretrain's
            ``RandomErasing``.
    """

    def __init__(self, erase_prob=0.5, min_area_ratio=0.02, max_area_ratio=0.4, aspect_range=(3 / 10, 10 / 3),
                 mode='const', fill_color=(128, 128, 128), fill_std=None) -> None:
        from mmpretrain.datasets.transforms import RandomErasing
        self.reference = RandomErasing(erase_prob=erase_prob, min_area_ratio=min_area_ratio,
                                       max_area_ratio=max_area_ratio, aspect_range=aspect_range, mode=mode,
                                       fill_color=fill_color, fill_std=fill_std)

    def transform(self, results: dict) -> dict:
        ref = self.reference
        erasing = None
        if not ref.random_disable():
            h, w = results['img_shape'][:2]
            erasing = dict(box=tuple(int(v) for v in ref.random_patch(h, w)), mode=ref.mode,
                           fill_color=tuple(float(v) for v in ref.fill_color),
                           fill_std=None if ref.fill_std is None else tuple(float(v) for v in ref.fill_std))
        results[RANDOM_ERASING_KEY] = erasing
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.reference!r})'
