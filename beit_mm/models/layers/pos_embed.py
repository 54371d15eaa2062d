"""Absolute position embedding resampling for plain ViTs (cls token first, then a Wh x Ww grid)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def resize_pos_embed(pos_embed: Tensor, src_grid: tuple[int, int], dst_grid: tuple[int, int],
                     num_extra_tokens: int = 1) -> Tensor:
    """(1, extra + Sh*Sw, C) -> (1, extra + Dh*Dw, C) by bicubic interpolation of the grid part (as unilm/timm)."""
    src_grid, dst_grid = tuple(src_grid), tuple(dst_grid)
    n = pos_embed.shape[1] - num_extra_tokens
    if n != src_grid[0] * src_grid[1]:
        raise ValueError(f'position embedding has {n} grid tokens, which does not fit a {src_grid} grid')
    if src_grid == dst_grid:
        return pos_embed
    extra, grid = pos_embed[:, :num_extra_tokens], pos_embed[:, num_extra_tokens:]
    grid = grid.reshape(1, *src_grid, -1).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=dst_grid, mode='bicubic', align_corners=False)
    grid = grid.permute(0, 2, 3, 1).flatten(1, 2).to(pos_embed.dtype)
    return torch.cat([extra, grid], dim=1)
