"""Pillow's 8-bit resampling (``Image.resize`` of an RGB image: bicubic, Lanczos) on tensors, on any device.

Two separable passes, horizontal then vertical, with Pillow's 22-bit fixed-point weights; each pass sums
``pixel * weight`` from ``1 << 21`` and keeps ``clip(sum >> 22, 0, 255)``, as ``libImaging/Resample.c`` does.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

PRECISION_BITS = 22
SUPPORT = dict(bicubic=2.0, lanczos=3.0)
BICUBIC_A = -0.5
# Most gathered (rows x taps) values of one pass processed at once.
MAX_GATHER = 1 << 24


def _bicubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    a = BICUBIC_A
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _sinc(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid='ignore', divide='ignore'):
        y = x * math.pi
        return np.where(x == 0.0, 1.0, np.sin(y) / y)


def _lanczos(x: np.ndarray) -> np.ndarray:
    return np.where((-3.0 <= x) & (x < 3.0), _sinc(x) * _sinc(x / 3), 0.0)


FILTERS = dict(bicubic=_bicubic, lanczos=_lanczos)


def resample_coefficients(in_size: int, out_size: int, interpolation: str) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's fixed-point resize coefficients from ``in_size`` to ``out_size`` pixels ('bicubic' or 'lanczos').

    Returns:
        ``(first, weights)``: (out_size,) int64 first input pixel of each window; (out_size, taps) int32 weights
        (``1 << 22`` = 1), zero beyond a window's end.

    Raises:
        ValueError: an unknown interpolation or a non-positive size.
    """
    if interpolation not in FILTERS:
        raise ValueError(f'interpolation {interpolation!r} is not one of {sorted(FILTERS)}')
    if in_size <= 0 or out_size <= 0:
        raise ValueError(f'sizes must be positive, got {in_size} -> {out_size}')
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = SUPPORT[interpolation] * filterscale
    taps = int(math.ceil(support)) * 2 + 1
    center = (np.arange(out_size, dtype=np.float64) + 0.5) * scale
    first = np.maximum((center - support + 0.5).astype(np.int64), 0)  # C's (int) truncates; negatives become 0
    last = np.minimum((center + support + 0.5).astype(np.int64), in_size)
    count = last - first
    x = np.arange(taps, dtype=np.float64)[None, :]
    weights = FILTERS[interpolation]((x + first[:, None] - center[:, None] + 0.5) * (1.0 / filterscale))
    weights = np.where(x < count[:, None], weights, 0.0)
    total = np.zeros(out_size, dtype=np.float64)
    for t in range(taps):  # left to right, as Pillow sums
        total += weights[:, t]
    weights = np.where(total[:, None] != 0.0, weights / np.where(total == 0.0, 1.0, total)[:, None], weights)
    fixed = weights * (1 << PRECISION_BITS)
    fixed = np.trunc(np.where(weights < 0, fixed - 0.5, fixed + 0.5)).astype(np.int32)
    return first, fixed


def resize_tables(in_size: tuple[int, int], size: tuple[int, int],
                  interpolation: str) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Pillow's resize passes from ``in_size`` ``(H, W)`` to ``size`` ``(h, w)``: ``[(dim, index, weight)]``, with
    (out, taps) int64 ``index`` and ``weight``; empty when the size does not change."""
    tables = []
    for dim, n, out in ((-1, in_size[1], size[1]), (-2, in_size[0], size[0])):
        if n != out:
            first, weight = resample_coefficients(n, out, interpolation)
            index = np.minimum(first[:, None] + np.arange(weight.shape[1]), n - 1)
            tables.append((dim, index, weight.astype(np.int64)))
    return tables


def apply_tables(image: Tensor, tables: list[tuple[int, Tensor, Tensor]]) -> Tensor:
    """Pillow's resize passes (tensors on the image's device) on a (C, H, W) 0..255 image; (C, h, w) uint8."""
    x = image.to(torch.int64)
    for dim, index, weight in tables:
        x = x.transpose(dim, -1)
        rows = x.reshape(-1, x.shape[-1])
        step = max(1, MAX_GATHER // max(1, index.numel()))
        out = []
        for start in range(0, rows.shape[0], step):
            total = (rows[start:start + step, index] * weight).sum(-1) + (1 << (PRECISION_BITS - 1))
            out.append((total >> PRECISION_BITS).clamp_(0, 255))
        x = torch.cat(out).reshape(*x.shape[:-1], index.shape[0]).transpose(dim, -1)
    return x.to(torch.uint8).contiguous()


def pil_resize(image: Tensor, size: tuple[int, int], interpolation: str) -> Tensor:
    """Pillow's ``resize`` of a (C, H, W) 0..255 image to ``size`` ``(h, w)``; (C, h, w) uint8 on its device."""
    device = image.device
    tables = [(dim, torch.from_numpy(index).to(device), torch.from_numpy(weight).to(device))
              for dim, index, weight in resize_tables(tuple(image.shape[-2:]), tuple(size), interpolation)]
    return apply_tables(image, tables)
