"""mmpretrain's ``RandAugment`` drawn on the worker (:class:`SampleRandAugment`) and applied by the data preprocessor
to batched 8-bit BGR tensors (:func:`rand_augment`), each image with its own ops.

The sampler makes mmpretrain's NumPy draws in its order; the ops reproduce mmcv's image functions with their uint8
truncation, the geometric ones as one bicubic ``cv2.warpAffine``.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import math

import cv2
import numpy as np
import torch
from mmcv.transforms import BaseTransform
from torch import Tensor

from beit_mm.registry import TRANSFORMS

from .warp_affine import inverse_affine, warp_affine_bicubic

# OpenCV's COLOR_BGR2GRAY of 8-bit images: (B, G, R) weights / 2**15.
GRAY_WEIGHTS_BGR = (3735, 19235, 9798)
GRAY_SHIFT = 15
# PIL.ImageFilter.SMOOTH: [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13.
SMOOTH_CENTER, SMOOTH_SUM = 5.0, 13.0
WARP_OPS = ('Rotate', 'Shear', 'Translate')


def _pad(value) -> tuple[int, int, int]:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * 3


def _signed(op, value: float | None) -> float:
    """``op.random_negative(value if given else op.random_magnitude())``, as mmpretrain's ops call them."""
    return op.random_negative(op.random_magnitude() if value is None else value)


def _unsigned(op, value: float | None) -> float:
    """``value if given else op.random_magnitude()``."""
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
    """mmpretrain ``RandAugment``'s draws into ``results[key]``: the enabled ops in order, each ``dict(type, ...)``.

    Args:
        policies, num_policies, magnitude_level, magnitude_std, total_level, hparams: as mmpretrain's
            ``RandAugment``; geometric ops must be bicubic.

    Raises:
        ValueError: a policy with no tensor implementation, or a geometric op with another interpolation.
    """

    key = 'rand_augment'

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
        results[self.key] = ops
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.reference!r})'


def _column(values: Sequence[float], device: torch.device, dtype=torch.float64) -> Tensor:
    return torch.tensor(list(values), dtype=dtype, device=device).view(-1, 1, 1, 1)


def bgr_to_gray(images: Tensor) -> Tensor:
    """OpenCV's ``cvtColor(COLOR_BGR2GRAY)`` of 8-bit images. (N, 3, H, W) BGR -> (N, 1, H, W) int32."""
    x = images.to(torch.int32)
    weights = torch.tensor(GRAY_WEIGHTS_BGR, dtype=torch.int32, device=images.device).view(1, 3, 1, 1)
    return ((x * weights).sum(1, keepdim=True) + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT


def _blend_float(images: Tensor, degenerate: Tensor, factor: Tensor) -> Tensor:
    """mmcv's float32 ``cv2.addWeighted`` blend with ``degenerate``, clipped and cast to uint8."""
    blended = images.to(torch.float64) * factor + degenerate.to(torch.float64) * (1.0 - factor)
    return blended.to(torch.float32).clamp_(0.0, 255.0).to(torch.uint8)


def invert(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.iminvert``."""
    return 255 - images


def posterize(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.posterize(img, bits)``: the low ``8 - bits`` bits cleared."""
    shift = _column([8 - p['bits'] for p in params], images.device, torch.int32)
    return ((images.to(torch.int32) >> shift) << shift).to(torch.uint8)


def solarize(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.solarize(img, thr)``: values >= thr inverted."""
    thr = _column([p['thr'] for p in params], images.device)
    return torch.where(images.to(torch.float64) < thr, images, 255 - images)


def solarize_add(images: Tensor, params: Sequence[dict]) -> Tensor:
    """mmpretrain ``SolarizeAdd``: ``where(img < thr, minimum(img + magnitude, 255), img)``, truncated."""
    thr = _column([p['thr'] for p in params], images.device)
    magnitude = _column([p['magnitude'] for p in params], images.device)
    x = images.to(torch.float64)
    return torch.where(x < thr, (x + magnitude).clamp(max=255.0), x).to(torch.uint8)


def auto_contrast(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.auto_contrast(img)`` (cutoff 0): each channel stretched from [min, max] to [0, 255]."""
    low = images.amin(dim=(2, 3), keepdim=True).to(torch.float64)
    high = images.amax(dim=(2, 3), keepdim=True).to(torch.float64)
    scale = torch.full_like(low, 255.0).div_((high - low).clamp(min=1.0))  # tensor / tensor: IEEE, as NumPy
    stretched = (images.to(torch.float64) * scale + (-low * scale)).clamp_(0.0, 255.0).to(torch.uint8)
    return torch.where(low < high, stretched, images)


def equalize(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.imequalize``: each channel through its histogram's LUT."""
    n, c, h, w = images.shape
    flat = images.reshape(n * c, h * w).to(torch.int64)
    hist = torch.zeros((n * c, 256), dtype=torch.int64, device=images.device)
    hist.scatter_add_(1, flat, torch.ones_like(flat))
    last = hist.gather(1, flat.amax(dim=1, keepdim=True))  # the count of the highest value present
    step = (h * w - last) // 255
    lut = (hist.cumsum(1) + step // 2) // step.clamp(min=1)
    lut = torch.cat([torch.zeros_like(lut[:, :1]), lut[:, :-1]], 1).clamp_(max=255)
    mapped = lut.gather(1, flat)
    return torch.where(step > 0, mapped, flat).view(n, c, h, w).to(torch.uint8)


def brightness(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.adjust_brightness(img, factor)`` (cv2 backend): blended with black."""
    return _blend_float(images, torch.zeros((), device=images.device), _column([p['factor'] for p in params],
                                                                               images.device))


def contrast(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.adjust_contrast(img, factor)`` (cv2 backend): blended with the rounded mean of the image's grey."""
    gray = bgr_to_gray(images).to(torch.float64)
    total = gray.sum(dim=(1, 2, 3), keepdim=True)
    mean = torch.round(total.div(torch.full_like(total, gray[0].numel())))  # not a reciprocal's product
    return _blend_float(images, mean, _column([p['factor'] for p in params], images.device))


def sharpness(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.adjust_sharpness(img, factor)``: blended with ``cv2.filter2D(img, -1, SMOOTH)`` (reflect-101)."""
    x = images.to(torch.float64)
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode='reflect')
    h, w = x.shape[2:]
    window = sum(padded[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3))
    blurred = torch.round((window + (SMOOTH_CENTER - 1.0) * x) / SMOOTH_SUM)
    return _blend_float(images, blurred, _column([p['factor'] for p in params], images.device))


def color(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.adjust_color(img, alpha=factor)`` (cv2 backend), rounded half to even and saturated."""
    factor = _column([p['factor'] for p in params], images.device, torch.float32).to(torch.float64)
    beta = _column([1.0 - p['factor'] for p in params], images.device, torch.float32).to(torch.float64)
    grey = (bgr_to_gray(images).to(torch.float64) * beta).to(torch.float32).to(torch.float64)
    blended = (images.to(torch.float64) * factor + grey).to(torch.float32)  # the product is exact in float64
    return torch.round(blended).clamp_(0.0, 255.0).to(torch.uint8)


def warp(images: Tensor, params: Sequence[dict]) -> Tensor:
    """``mmcv.imrotate`` / ``imshear`` / ``imtranslate`` (bicubic, constant pad colour) from each image's matrix."""
    inverse = torch.tensor([p['inverse'] for p in params], dtype=torch.float64)
    border = torch.tensor([p['pad_val'] for p in params], dtype=torch.int32)
    return warp_affine_bicubic(images, inverse, border)


OPS: dict[str, Callable[[Tensor, Sequence[dict]], Tensor]] = dict(
    AutoContrast=auto_contrast, Equalize=equalize, Invert=invert, Posterize=posterize, Solarize=solarize,
    SolarizeAdd=solarize_add, ColorTransform=color, Contrast=contrast, Brightness=brightness, Sharpness=sharpness,
    **dict.fromkeys(WARP_OPS, warp))


def _opencv_op(image: np.ndarray, op: dict) -> np.ndarray:
    """One op as mmpretrain calls mmcv for it, on an (H, W, 3) BGR uint8 array."""
    import mmcv
    name = op['type']
    if name in WARP_OPS:  # the matrix the worker inverted: cv2 takes it as given with WARP_INVERSE_MAP
        h, w = image.shape[:2]
        return cv2.warpAffine(image, np.array(op['inverse'], np.float64).reshape(2, 3), (w, h),
                              flags=cv2.INTER_CUBIC | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=op['pad_val'])
    if name == 'SolarizeAdd':
        return np.where(image < op['thr'], np.minimum(image + op['magnitude'], 255), image).astype(np.uint8)
    calls = dict(AutoContrast=lambda: mmcv.auto_contrast(image), Equalize=lambda: mmcv.imequalize(image),
                 Invert=lambda: mmcv.iminvert(image), Posterize=lambda: mmcv.posterize(image, op['bits']),
                 Solarize=lambda: mmcv.solarize(image, op['thr']),
                 ColorTransform=lambda: mmcv.adjust_color(image, alpha=op['factor'], backend='cv2'),
                 Contrast=lambda: mmcv.adjust_contrast(image, op['factor'], backend='cv2'),
                 Brightness=lambda: mmcv.adjust_brightness(image, op['factor'], backend='cv2'),
                 Sharpness=lambda: mmcv.adjust_sharpness(image, op['factor']))
    return calls[name]().astype(np.uint8)


def rand_augment(images: Tensor, ops: Sequence[Sequence[dict]], backend: str = 'auto') -> Tensor:
    """Each image's drawn RandAugment ops, in their order.

    Args:
        images: (N, 3, H, W) uint8 BGR, on any device.
        ops: per image the drawn ops, each a dict with ``type`` (a key of :data:`OPS`) and its parameters.
        backend: ``'torch'``, ``'opencv'`` (on the CPU) or ``'auto'`` (OpenCV for CPU images).

    Returns:
        (N, 3, H, W) uint8, a new tensor on the images' device.

    Raises:
        ValueError: an op type this module does not apply, or an unknown backend.
    """
    if backend not in ('auto', 'torch', 'opencv'):
        raise ValueError(f"backend={backend!r}; use 'auto', 'torch' or 'opencv'")
    for image_ops in ops:
        for op in image_ops:
            if op['type'] not in OPS:
                raise ValueError(f"RandAugment op {op['type']!r} has no tensor implementation here ({sorted(OPS)})")
    if backend == 'opencv' or (backend == 'auto' and images.device.type == 'cpu'):
        out = []
        for image, image_ops in zip(images.cpu(), ops):
            array = cv2.merge([plane.numpy() for plane in image])
            for op in image_ops:
                array = _opencv_op(array, op)
            out.append(torch.from_numpy(np.stack(cv2.split(array))))
        return torch.stack(out).to(images.device) if out else images.clone()
    out = images.clone()
    for slot in range(max((len(o) for o in ops), default=0)):
        groups: dict[Callable, list[int]] = defaultdict(list)
        for i, image_ops in enumerate(ops):
            if slot < len(image_ops):
                groups[OPS[image_ops[slot]['type']]].append(i)
        for apply, index in groups.items():
            rows = torch.tensor(index, device=out.device)
            out[rows] = apply(out[rows], [ops[i][slot] for i in index])
    return out
