"""OpenCV's ``cv2.warpAffine`` of 8-bit images (bicubic, constant border) on batched tensors, bit for bit.

Each output pixel maps to source coordinates in fixed point, rounded to 1/32 pixel, and sums its 4 x 4 source pixels
with 15-bit integer weights of Keys' cubic (``A = -0.75``).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

INTER_BITS = 5
INTER_TAB_SIZE = 1 << INTER_BITS
AB_BITS = 10
AB_SCALE = 1 << AB_BITS
ROUND_DELTA = AB_SCALE // INTER_TAB_SIZE // 2
COEF_BITS = 15
COEF_SCALE = 1 << COEF_BITS
CUBIC_A = np.float32(-0.75)


def _cubic(x: np.float32) -> list[np.float32]:
    """OpenCV's ``interpolateCubic(x)`` in float32 arithmetic: the 4 weights of the taps at -1, 0, 1, 2."""
    a, one = CUBIC_A, np.float32(1)
    c0 = ((a * (x + one) - np.float32(5) * a) * (x + one) + np.float32(8) * a) * (x + one) - np.float32(4) * a
    c1 = ((a + np.float32(2)) * x - (a + np.float32(3))) * x * x + one
    c2 = ((a + np.float32(2)) * (one - x) - (a + np.float32(3))) * (one - x) * (one - x) + one
    return [c0, c1, c2, one - c0 - c1 - c2]


@functools.lru_cache(maxsize=1)
def bicubic_table() -> np.ndarray:
    """OpenCV's fixed-point bicubic weights: (1024, 16) int32, row ``fy * 32 + fx`` the 4 x 4 weights, summing to
    ``2**15``."""
    taps = [_cubic(np.float32(i) * np.float32(1.0 / INTER_TAB_SIZE)) for i in range(INTER_TAB_SIZE)]
    table = np.zeros((INTER_TAB_SIZE * INTER_TAB_SIZE, 16), np.int32)
    for i in range(INTER_TAB_SIZE):
        for j in range(INTER_TAB_SIZE):
            row = table[i * INTER_TAB_SIZE + j]
            for k1 in range(4):
                for k2 in range(4):
                    row[k1 * 4 + k2] = np.rint(taps[i][k1] * taps[j][k2] * np.float32(COEF_SCALE))
            diff = int(row.sum()) - COEF_SCALE
            if diff:
                low = high = 2 * 4 + 2
                for k1 in (2, 3):
                    for k2 in (2, 3):
                        k = k1 * 4 + k2
                        if row[k] < row[low]:
                            low = k
                        elif row[k] > row[high]:
                            high = k
                row[high if diff < 0 else low] -= diff
    return table


def inverse_affine(matrix: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The destination -> source ``(m00, m01, m02, m10, m11, m12)`` that ``cv2.warpAffine`` computes from ``matrix``."""
    m = [float(v) for row in matrix for v in row]
    det = m[0] * m[4] - m[1] * m[3]
    det = 1.0 / det if det != 0 else 0.0
    a11, a22 = m[4] * det, m[0] * det
    m[0] = a11
    m[1] *= -det
    m[3] *= -det
    m[4] = a22
    b1 = -m[0] * m[2] - m[1] * m[5]
    b2 = -m[3] * m[2] - m[4] * m[5]
    m[2], m[5] = b1, b2
    return tuple(m)


def warp_affine_bicubic(images: Tensor, inverse: Tensor, border: Tensor) -> Tensor:
    """``cv2.warpAffine(..., flags=INTER_CUBIC, borderMode=BORDER_CONSTANT)`` of each (N, C, H, W) uint8 image.

    Args:
        images: (N, C, H, W) uint8.
        inverse: (N, 6) float64 :func:`inverse_affine` matrices.
        border: (N, C) border values, 0..255.
    """
    n, c, h, w = images.shape
    device = images.device
    m = inverse.to(device=device, dtype=torch.float64)
    xs = torch.arange(w, dtype=torch.float64, device=device)
    ys = torch.arange(h, dtype=torch.float64, device=device)
    adelta = torch.round(m[:, 0:1] * xs * AB_SCALE).long()  # (N, W)
    bdelta = torch.round(m[:, 3:4] * xs * AB_SCALE).long()
    x0 = torch.round((m[:, 1:2] * ys + m[:, 2:3]) * AB_SCALE).long() + ROUND_DELTA  # (N, H)
    y0 = torch.round((m[:, 4:5] * ys + m[:, 5:6]) * AB_SCALE).long() + ROUND_DELTA
    x = (x0[:, :, None] + adelta[:, None, :]) >> (AB_BITS - INTER_BITS)  # (N, H, W), 1/32 px
    y = (y0[:, :, None] + bdelta[:, None, :]) >> (AB_BITS - INTER_BITS)
    weights = torch.from_numpy(bicubic_table()).to(device)[((y & (INTER_TAB_SIZE - 1)) * INTER_TAB_SIZE
                                                            + (x & (INTER_TAB_SIZE - 1)))]  # (N, H, W, 16)
    sx, sy = (x >> INTER_BITS) - 1, (y >> INTER_BITS) - 1
    flat = images.reshape(n, c, h * w).to(torch.int32)
    fill = border.to(device=device, dtype=torch.int32).view(n, c, 1, 1)
    total = torch.zeros((n, c, h, w), dtype=torch.int32, device=device)
    for k1 in range(4):
        yy = sy + k1
        inside_y = (yy >= 0) & (yy < h)
        for k2 in range(4):
            xx = sx + k2
            inside = (inside_y & (xx >= 0) & (xx < w))[:, None]
            index = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).view(n, 1, h * w).expand(n, c, h * w)
            value = torch.where(inside, flat.gather(2, index).view(n, c, h, w), fill)
            total += value * weights[..., k1 * 4 + k2][:, None].to(torch.int32)
    return ((total + (1 << (COEF_BITS - 1))) >> COEF_BITS).clamp_(0, 255).to(torch.uint8)
