"""Axial 2-D rotary position embedding of DINOv3 (Siméoni et al. 2025, facebookresearch/dinov3 @ 6876159
``dinov3/layers/rope_position_encoding.py`` and ``dinov3/layers/attention.py:15-30``).

Patch ``(i, j)`` of an ``h x w`` grid sits at ``(y, x) = (2 (i + 0.5) / h - 1, 2 (j + 0.5) / w - 1)`` (normalized
``'separate'``; ``'min'``/``'max'`` divide both by ``min(h, w)``/``max(h, w)``), so every grid spans [-1, 1]: a model
trained at 224 px reads a 640-px grid at the same coordinates, only denser. A head of width ``D`` gets ``D / 4``
periods ``p_k`` (``base ** (4k / D)``, or ``min_period .. max_period`` log-spaced), the angles ``2 pi y / p_k`` and
``2 pi x / p_k`` laid out as ``[y-angles, x-angles, y-angles, x-angles]`` (D values), and ``q``, ``k`` of the patch
tokens become ``q cos + rotate_half(q) sin``. Tokens before the patches (cls, registers, EoMT's queries) are not
rotated. Training-time augmentations of the coordinates, drawn anew at every call in training mode and off in eval:
``shift`` (add U(-s, s) per axis), ``jitter`` (multiply each axis by a log-uniform factor in [1/j, j]) and
``rescale`` (multiply both by one log-uniform factor in [1/r, r]; the released ViTs use 2).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

NORMALIZE_COORDS = ('separate', 'min', 'max')


class RopePositionEmbedding(nn.Module):
    """Sines and cosines of DINOv3's axial RoPE for a patch grid (no learnable weights).

    Args:
        head_dims: the attention head width ``D`` (a multiple of 4).
        base: period base (DINOv3: 100); exclusive with ``min_period``/``max_period``.
        min_period, max_period: log-spaced periods between the two instead of ``base``.
        normalize_coords: ``'separate'`` (each axis by its own length; DINOv3's), ``'min'`` or ``'max'``.
        shift_coords, jitter_coords, rescale_coords: training-time coordinate augmentations (module docstring), or
            None for none.

    Buffer ``periods`` (D/4,), float32, not saved (the converters check a checkpoint's against it).
    """

    def __init__(self,
                 head_dims: int,
                 base: float | None = 100.0,
                 min_period: float | None = None,
                 max_period: float | None = None,
                 normalize_coords: str = 'separate',
                 shift_coords: float | None = None,
                 jitter_coords: float | None = None,
                 rescale_coords: float | None = None) -> None:
        super().__init__()
        if head_dims % 4:
            raise ValueError(f'RoPE needs a head width divisible by 4 (two axes x sin/cos), got {head_dims}')
        both = min_period is not None and max_period is not None
        if (base is None) == (not both) or (min_period is None) != (max_period is None):
            raise ValueError('give either base or both min_period and max_period (DINOv3: base=100)')
        if normalize_coords not in NORMALIZE_COORDS:
            raise ValueError(f'normalize_coords={normalize_coords!r} is not one of {NORMALIZE_COORDS}')
        self.head_dims = head_dims
        self.normalize_coords = normalize_coords
        self.shift_coords, self.jitter_coords, self.rescale_coords = shift_coords, jitter_coords, rescale_coords
        self.register_buffer('periods', rope_periods(head_dims, base, min_period, max_period), persistent=False)

    def coords(self, grid: tuple[int, int]) -> Tensor:
        """(h*w, 2) float32 patch-centre coordinates (y, x) in [-1, 1], augmented in training mode."""
        h, w = grid
        dd = dict(device=self.periods.device, dtype=torch.float32)
        div_h, div_w = {'separate': (h, w), 'min': (min(h, w), ) * 2, 'max': (max(h, w), ) * 2}[self.normalize_coords]
        ys = torch.arange(0.5, h, **dd) / div_h
        xs = torch.arange(0.5, w, **dd) / div_w
        coords = 2.0 * torch.stack(torch.meshgrid(ys, xs, indexing='ij'), dim=-1).flatten(0, 1) - 1.0
        if self.training:
            if self.shift_coords is not None:
                coords = coords + torch.empty(2, **dd).uniform_(-self.shift_coords, self.shift_coords)
            if self.jitter_coords is not None:
                lim = math.log(self.jitter_coords)
                coords = coords * torch.empty(2, **dd).uniform_(-lim, lim).exp()
            if self.rescale_coords is not None:
                lim = math.log(self.rescale_coords)
                coords = coords * torch.empty(1, **dd).uniform_(-lim, lim).exp()
        return coords

    def forward(self, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """Patch grid (h, w) -> (sin, cos), each (h*w, D) float32."""
        angles = 2 * math.pi * self.coords(grid)[:, :, None] / self.periods[None, None, :]  # (hw, 2, D/4)
        angles = angles.flatten(1, 2).tile(2)  # (hw, D): [y, x, y, x] angle blocks
        return angles.sin(), angles.cos()


def rope_periods(head_dims: int, base: float | None, min_period: float | None = None,
                 max_period: float | None = None) -> Tensor:
    """(D/4,) float32 periods: ``base ** (4k / D)``, or ``min_period .. max_period`` log-spaced (DINOv3
    ``RopePositionEmbedding._init_weights``)."""
    n = head_dims // 4
    if base is not None:
        return base ** (2 * torch.arange(n, dtype=torch.float32) / (head_dims // 2))
    ratio = max_period / min_period
    return ratio ** torch.linspace(0, 1, n, dtype=torch.float32) / ratio * max_period


def rotate_half(x: Tensor) -> Tensor:
    """[x1, x2] -> [-x2, x1] over the last dim."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(q: Tensor, k: Tensor, rope: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    """Rotate the last ``h*w`` tokens of q and k (B, heads, T, D) by ``rope = (sin, cos)`` ((h*w, D) each), in
    float32, returning q and k in their dtype; the ``T - h*w`` tokens before them are left as they are."""
    sin, cos = rope
    prefix = q.shape[-2] - sin.shape[-2]
    if prefix < 0:
        raise ValueError(f'{q.shape[-2]} tokens, fewer than the {sin.shape[-2]} patches of the rotary embedding')

    def rotate(t: Tensor) -> Tensor:
        patches = t[..., prefix:, :].float()
        patches = patches * cos + rotate_half(patches) * sin
        return torch.cat([t[..., :prefix, :], patches.to(t.dtype)], dim=-2)

    return rotate(q), rotate(k)
