"""mmseg's ``PhotoMetricDistortion`` drawn on the worker and applied on the device, pixel for pixel as OpenCV's.

Brightness ``x + beta``, contrast ``x * alpha`` (first or last), saturation (S ``* alpha``) and hue (H ``+ delta``
mod 180), each clipped and truncated to uint8, through OpenCV's 8-bit HSV conversions.
"""
from __future__ import annotations

import cv2
import numpy as np
import torch
from mmcv.transforms import BaseTransform
from torch import Tensor

from beit_mm.registry import TRANSFORMS

HSV_SHIFT = 12
HUE_RANGE = 180
# Which of (v, v(1 - s), v(1 - s f), v(1 - s(1 - f))) is b, g, r in each of the 6 hue sectors.
SECTOR_BGR = ((1, 3, 0), (1, 0, 2), (3, 0, 1), (0, 2, 1), (0, 1, 3), (2, 1, 0))
# Pixels per vector iteration of OpenCV's HSV2RGB_b (32 with AVX2); the scalar rest of a row rounds.
OPENCV_HSV_BLOCK = 32


@TRANSFORMS.register_module()
class SamplePhotoMetricDistortion(BaseTransform):
    """Draws mmseg ``PhotoMetricDistortion``'s parameters into ``results[key]`` (None = op off).

    Args:
        brightness_delta, contrast_range, saturation_range, hue_delta: as mmseg's ``PhotoMetricDistortion``.
    """

    key = 'photometric_distortion'

    def __init__(self,
                 brightness_delta: int = 32,
                 contrast_range: tuple[float, float] = (0.5, 1.5),
                 saturation_range: tuple[float, float] = (0.5, 1.5),
                 hue_delta: int = 18) -> None:
        self.brightness_delta = brightness_delta
        self.contrast_range = tuple(contrast_range)
        self.saturation_range = tuple(saturation_range)
        self.hue_delta = hue_delta

    def transform(self, results: dict) -> dict:
        rng = np.random
        brightness = float(rng.uniform(-self.brightness_delta, self.brightness_delta)) if rng.randint(2) else None
        contrast_last = rng.randint(2) == 0
        contrast = None
        if not contrast_last and rng.randint(2):
            contrast = float(rng.uniform(*self.contrast_range))
        saturation = float(rng.uniform(*self.saturation_range)) if rng.randint(2) else None
        hue = int(rng.randint(-self.hue_delta, self.hue_delta)) if rng.randint(2) else None
        if contrast_last and rng.randint(2):
            contrast = float(rng.uniform(*self.contrast_range))
        results[self.key] = dict(brightness=brightness, contrast=contrast, contrast_last=bool(contrast_last),
                                        saturation=saturation, hue=hue)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(brightness_delta={self.brightness_delta}, '
                f'contrast_range={self.contrast_range}, saturation_range={self.saturation_range}, '
                f'hue_delta={self.hue_delta})')


def _division_tables(device: torch.device) -> tuple[Tensor, Tensor]:
    """OpenCV's ``sdiv_table`` and ``hdiv_table180`` for i in 0..255."""
    i = torch.arange(256, dtype=torch.float64)
    sdiv = torch.round((255 << HSV_SHIFT) / i)
    hdiv = torch.round((HUE_RANGE << HSV_SHIFT) / (6. * i))
    sdiv[0] = hdiv[0] = 0
    return sdiv.to(device, torch.int32), hdiv.to(device, torch.int32)


def bgr_to_hsv(image: Tensor) -> Tensor:
    """``cv2.cvtColor(image, cv2.COLOR_BGR2HSV)`` of a (3, H, W) uint8 BGR image; H in [0, 180)."""
    b, g, r = image.to(torch.int32).unbind(0)
    v = torch.maximum(torch.maximum(b, g), r)
    diff = v - torch.minimum(torch.minimum(b, g), r)
    sdiv, hdiv = _division_tables(image.device)
    half = 1 << (HSV_SHIFT - 1)
    s = (diff * sdiv[v] + half) >> HSV_SHIFT
    h = torch.where(v == r, g - b, torch.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (h * hdiv[diff] + half) >> HSV_SHIFT  # arithmetic shift: floor, as OpenCV's
    h = torch.where(h < 0, h + HUE_RANGE, h)
    return torch.stack([h, s, v]).to(torch.uint8)


def hsv_to_bgr(hsv: Tensor, block: int = OPENCV_HSV_BLOCK) -> Tensor:
    """``cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)`` of a (3, H, W) uint8 image, pixel for pixel.

    OpenCV truncates in its vector code (``block`` pixels at a time) and rounds in the scalar rest of a row.
    """
    h, s, v = hsv.to(torch.float32).unbind(0)
    s = s * (1. / 255.)
    v = v * (1. / 255.)
    h = h * torch.tensor(6. / HUE_RANGE, dtype=torch.float32)
    sector = torch.floor(h)
    f = h - sector
    s64 = s.to(torch.float64)  # a float32 product is exact in float64: one rounding, as an FMA
    tab = torch.stack([v, v * (1. - s), v * (1. - s64 * f).to(torch.float32),
                       v * (1. - s64 * (1. - f)).to(torch.float32)])  # (4, H, W)
    index = torch.tensor(SECTOR_BGR, device=hsv.device)[sector.to(torch.int64) % 6].permute(2, 0, 1)  # (3, H, W)
    bgr = torch.gather(tab, 0, index) * 255.
    width = hsv.shape[-1]
    scalar = torch.arange(width, device=hsv.device) >= width - width % block
    bgr = torch.where(scalar, torch.round(bgr), torch.trunc(bgr))
    return bgr.clamp(0, 255).to(torch.uint8)


def _convert(x: Tensor, alpha: float = 1., beta: float = 0.) -> Tensor:
    """mmseg ``PhotoMetricDistortion.convert``: ``x * alpha + beta`` in float32, clipped to [0, 255], truncated."""
    return (x.to(torch.float32) * alpha + beta).clamp(0, 255).to(torch.uint8)


def _convert_array(x: np.ndarray, alpha: float = 1., beta: float = 0.) -> np.ndarray:
    return np.clip(x.astype(np.float32) * alpha + beta, 0, 255).astype(np.uint8)


def _distort_array(image: np.ndarray, params: dict) -> np.ndarray:
    contrast, last = params.get('contrast'), params['contrast_last']
    if params.get('brightness') is not None:
        image = _convert_array(image, beta=params['brightness'])
    if contrast is not None and not last:
        image = _convert_array(image, alpha=contrast)
    if params.get('saturation') is not None:
        hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
        hsv[:, :, 1] = _convert_array(hsv[:, :, 1], alpha=params['saturation'])
        image = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    if params.get('hue') is not None:
        hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
        hsv[:, :, 0] = (hsv[:, :, 0].astype(np.int64) + int(params['hue'])) % HUE_RANGE
        image = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    if contrast is not None and last:
        image = _convert_array(image, alpha=contrast)
    return image


def photometric_distortion(image: Tensor, params: dict, backend: str = 'auto') -> Tensor:
    """One image's photometric distortion as mmseg applies it.

    Args:
        image: (3, H, W) uint8 BGR.
        params: ``dict(brightness, contrast, contrast_last, saturation, hue)``; None = op skipped.
        backend: ``'torch'``, ``'opencv'`` (on the CPU) or ``'auto'`` (OpenCV for a CPU image).

    Returns:
        (3, H, W) uint8 BGR, on the image's device.
    """
    if backend not in ('auto', 'torch', 'opencv'):
        raise ValueError(f"backend={backend!r}; use 'auto', 'torch' or 'opencv'")
    if backend == 'opencv' or (backend == 'auto' and image.device.type == 'cpu'):
        array = cv2.merge([plane.numpy() for plane in image.cpu()])
        return torch.from_numpy(np.stack(cv2.split(_distort_array(array, params)))).to(image.device)
    if params.get('brightness') is not None:
        image = _convert(image, beta=params['brightness'])
    contrast, last = params.get('contrast'), params['contrast_last']
    if contrast is not None and not last:
        image = _convert(image, alpha=contrast)
    if params.get('saturation') is not None:
        hsv = bgr_to_hsv(image)
        hsv = torch.stack([hsv[0], _convert(hsv[1], alpha=params['saturation']), hsv[2]])
        image = hsv_to_bgr(hsv)
    if params.get('hue') is not None:
        hsv = bgr_to_hsv(image)
        hue = torch.remainder(hsv[0].to(torch.int32) + int(params['hue']), HUE_RANGE).to(torch.uint8)
        image = hsv_to_bgr(torch.stack([hue, hsv[1], hsv[2]]))
    if contrast is not None and last:
        image = _convert(image, alpha=contrast)
    return image
