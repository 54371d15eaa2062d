"""Relative position bias of BEiT (unilm ``beit/modeling_finetune.py``) and its resampling to other grids.

The table has ``(2*Wh-1) * (2*Ww-1) + 3`` rows, one column per head: row ``(dh + Wh-1) * (2*Ww-1) + (dw + Ww-1)``
for a pair ``dh`` rows and ``dw`` columns apart, then cls->token, token->cls and cls->cls.
"""
from __future__ import annotations

from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NUM_CLS_ROWS = 3  # cls->token, token->cls, cls->cls


def num_relative_distance(grid: tuple[int, int]) -> int:
    """Rows of the bias table for a ``grid = (Wh, Ww)`` of patches."""
    return (2 * grid[0] - 1) * (2 * grid[1] - 1) + NUM_CLS_ROWS


def relative_position_index(grid: tuple[int, int]) -> Tensor:
    """Bias-table row of every token pair, cls first: int64 (Wh*Ww + 1, Wh*Ww + 1) on the
    CPU; cached in eager code."""
    if torch.compiler.is_compiling():
        return _relative_position_index(tuple(grid))
    return _cached_relative_position_index(tuple(grid))


def _relative_position_index(grid: tuple[int, int], device: torch.device | None = None) -> Tensor:
    wh, ww = grid
    coords = torch.stack(torch.meshgrid(torch.arange(wh, device=device), torch.arange(ww, device=device),
                                        indexing='ij')).flatten(1)  # (2, N)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)  # (N, N, 2)
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    n = wh * ww
    total = num_relative_distance(grid)
    index = torch.zeros((n + 1, n + 1), dtype=torch.long, device=device)
    index[1:, 1:] = rel.sum(-1)
    index[0, 0:] = total - 3
    index[0:, 0] = total - 2
    index[0, 0] = total - 1
    return index


# a cached tensor made under inference_mode could never be used by autograd afterwards
_cached_relative_position_index = lru_cache(maxsize=32)(torch.inference_mode(False)(_relative_position_index))


def gather_relative_position_bias(table: Tensor, grid: tuple[int, int], align: int = 1,
                                  dtype: torch.dtype | None = None) -> Tensor:
    """Bias for every token pair: (heads, Wh*Ww + 1, Wh*Ww + 1), from ``table``.

    Rows are gathered in the table's dtype, then cast to ``dtype``; ``align`` rounds the row stride up (CUDA's
    memory-efficient SDPA copies an unaligned bias).
    """
    if torch.onnx.is_in_onnx_export():  # a fixed-size export: plain ints, so the index is a constant of the graph
        grid = tuple(int(g) for g in grid)
    grid = tuple(grid)
    n = grid[0] * grid[1] + 1
    n_pad = -(-n // align) * align
    index = flat_relative_position_index(grid, n_pad, table.device)
    # index_select: its backward (index_add_) is ~2x faster on CPU than advanced indexing's index_put_
    bias = table.index_select(0, index).view(n, n_pad, -1).permute(2, 0, 1)  # (heads, N, N_pad), strided
    if torch.onnx.is_in_onnx_export():  # same values; the ONNX exporter has no in-place copy (folded to a constant)
        return bias[:, :, :n].to(dtype or table.dtype).contiguous()
    out = torch.empty(bias.shape, dtype=dtype or table.dtype, device=table.device).copy_(bias)
    return out[:, :, :n]



def with_query_rows(bias: Tensor, num_queries: int) -> Tensor:
    """Bias (heads, 1 + N, 1 + N) -> (heads, K + 1 + N, K + 1 + N), the K queries taking the cls
    token's rows and columns (they have no position either)."""
    if num_queries == 0:
        return bias
    n = bias.shape[-1]
    rows = torch.cat([torch.zeros(num_queries, dtype=torch.long), torch.arange(n)]).to(bias.device)
    return bias.index_select(1, rows).index_select(2, rows)


def flat_relative_position_index(grid: tuple[int, int], n_pad: int, device: torch.device) -> Tensor:
    """:func:`_flat_relative_position_index`, cached per grid and device in eager code."""
    if torch.compiler.is_compiling():
        return _flat_relative_position_index(tuple(grid), n_pad, device)
    return _cached_flat_relative_position_index(tuple(grid), n_pad, device)


def _flat_relative_position_index(grid: tuple[int, int], n_pad: int, device: torch.device) -> Tensor:
    """``relative_position_index(grid)`` with rows padded to ``n_pad``, flattened on
    ``device``: (N * n_pad,)."""
    if torch.compiler.is_compiling():  # built on the device inside the graph, no host-to-device copy
        index = _relative_position_index(grid, device)
    else:
        index = relative_position_index(grid).to(device)
    n = index.shape[0]
    if n_pad != n:
        index = F.pad(index, (0, n_pad - n))
    return index.reshape(-1)


_cached_flat_relative_position_index = lru_cache(maxsize=32)(torch.inference_mode(False)(_flat_relative_position_index))


def _geometric_offsets(src_len: int, dst_len: int) -> Tensor:
    """unilm's source offsets: ``src_len`` (odd) positions whose spacing grows by a ratio q so the extent is dst's."""
    half_src, half_dst = src_len // 2, dst_len // 2

    def progression(q: float) -> float:
        return (1.0 - q ** half_src) / (1.0 - q)

    left, right = 1.01, 1.5
    while right - left > 1e-6:
        q = (left + right) / 2.0
        if progression(q) > half_dst:
            right = q
        else:
            left = q
    dis, cur = [], 1.0
    for i in range(half_src):
        dis.append(cur)
        cur += q ** (i + 1)
    return torch.tensor([-d for d in reversed(dis)] + [0.0] + dis, dtype=torch.float64)


def cubic_spline_matrix(x: Tensor, t: Tensor) -> Tensor:
    """W (m, n) float64 with ``spline(t) = W @ y``: the not-a-knot cubic spline through knots ``x``.

    FITPACK's ``k=3, s=0`` spline (as ``interp2d(kind='cubic')``), extrapolated with the end pieces.
    """
    x = x.double()
    t = t.double()
    n = x.numel()
    if n < 4:
        raise ValueError(f'a not-a-knot cubic spline needs at least 4 knots, got {n}')
    h = x[1:] - x[:-1]  # (n-1,)
    # Second derivatives M solve A @ M = B @ y.
    a = torch.zeros(n, n, dtype=torch.float64)
    b = torch.zeros(n, n, dtype=torch.float64)
    for i in range(1, n - 1):
        a[i, i - 1], a[i, i], a[i, i + 1] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
        b[i, i - 1], b[i, i], b[i, i + 1] = 6 / h[i - 1], -6 / h[i - 1] - 6 / h[i], 6 / h[i]
    # not-a-knot: the third derivative is continuous at x[1] and x[n-2].
    a[0, 0], a[0, 1], a[0, 2] = -1 / h[0], 1 / h[0] + 1 / h[1], -1 / h[1]
    a[-1, -3], a[-1, -2], a[-1, -1] = -1 / h[-2], 1 / h[-2] + 1 / h[-1], -1 / h[-1]
    m = torch.linalg.solve(a, b)  # (n, n): M = m @ y
    idx = torch.searchsorted(x, t, right=True).sub(1).clamp(0, n - 2)  # interval of each t
    hi = h[idx]
    lo_w = (x[idx + 1] - t) / hi  # weight of the left knot in the linear part
    hi_w = (t - x[idx]) / hi
    w = torch.zeros(t.numel(), n, dtype=torch.float64)
    rows = torch.arange(t.numel())
    w[rows, idx] += lo_w
    w[rows, idx + 1] += hi_w
    # cubic correction: M_i * (lo_w^3 - lo_w) * h^2 / 6 + M_{i+1} * (hi_w^3 - hi_w) * h^2 / 6
    c_lo = ((lo_w ** 3 - lo_w) * hi ** 2 / 6)[:, None]
    c_hi = ((hi_w ** 3 - hi_w) * hi ** 2 / 6)[:, None]
    w += c_lo * m[idx] + c_hi * m[idx + 1]
    return w


def resize_rel_pos_bias_table(table: Tensor, src_grid: tuple[int, int], dst_grid: tuple[int, int]) -> Tensor:
    """Resample a bias table from ``src_grid`` to ``dst_grid``, keeping the 3 cls rows.

    Growing uses unilm's geometric-progression cubic method; shrinking takes the central block of offsets, exactly.
    """
    src_grid, dst_grid = tuple(src_grid), tuple(dst_grid)
    expected = num_relative_distance(src_grid)
    if table.shape[0] != expected:
        raise ValueError(f'relative position bias table has {table.shape[0]} rows but a {src_grid} grid needs '
                         f'{expected}; pass the grid the table was trained on (image size / patch size)')
    if src_grid == dst_grid:
        return table
    (sh, sw), (dh, dw) = [(2 * g[0] - 1, 2 * g[1] - 1) for g in (src_grid, dst_grid)]
    rel = table[:-NUM_CLS_ROWS].reshape(sh, sw, -1).permute(2, 0, 1)  # (heads, sh, sw)
    if dh >= sh and dw >= sw:
        wy = cubic_spline_matrix(_geometric_offsets(sh, dh), torch.arange(dh, dtype=torch.float64) - dh // 2)
        wx = cubic_spline_matrix(_geometric_offsets(sw, dw), torch.arange(dw, dtype=torch.float64) - dw // 2)
        wy, wx = wy.to(table.device), wx.to(table.device)
        new = torch.einsum('ij,hjk,lk->hil', wy, rel.double(), wx).to(table.dtype)
    elif dh <= sh and dw <= sw:
        top, left = (sh - dh) // 2, (sw - dw) // 2  # = Wh - wh, Ww - ww: offset 0 stays at the centre
        new = rel[:, top:top + dh, left:left + dw]
    else:
        raise ValueError(f'cannot resample a relative position bias from grid {src_grid} to {dst_grid}: one axis grows '
                         'and the other shrinks; use an input whose both sides are larger or both smaller')
    return torch.cat([new.permute(1, 2, 0).reshape(dh * dw, -1), table[-NUM_CLS_ROWS:]], dim=0)


class RelativePositionBias(nn.Module):
    """A relative position bias table shared by all blocks (BEiT pretraining, ``rel_pos_bias.*``).

    Args:
        grid: patch grid (Wh, Ww) the table is built for.
        num_heads: attention heads.
    """

    def __init__(self, grid: tuple[int, int], num_heads: int) -> None:
        super().__init__()
        self.grid = tuple(grid)
        self.relative_position_bias_table = nn.Parameter(torch.zeros(num_relative_distance(self.grid), num_heads))

    def forward(self, grid: tuple[int, int]) -> Tensor:
        """Table (num_relative_distance(grid), heads) for an input whose patch grid is ``grid``."""
        return resize_rel_pos_bias_table(self.relative_position_bias_table, self.grid, grid)
