"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", section 3).

Each block's head-averaged attention is mixed with the identity for the residual, ``A' = (A + I) / 2``, and the
blocks are chained: ``rollout = A'_L @ ... @ A'_1``; row ``i`` says how much of token ``i``'s last output is drawn
from each input token. CvT's stride-2 keys are spread evenly over the queries they cover
(:func:`square_cvt_attention`, an approximation) and rollout runs within one stage.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .attention import AttentionMap


def spread_matrix(query_grid: tuple[int, int], key_grid: tuple[int, int], num_cls: int) -> Tensor:
    """(N_kv, N_q) matrix mapping attention over strided keys to attention over query positions.

    Key ``(i, j)`` spreads its weight evenly over query positions ``(r, c)`` with ``r // sh == i`` and ``c // sw == j``
    where ``sh = ceil(Hq / Hk)``; cls tokens map to themselves. Every row sums to 1.
    """
    (hq, wq), (hk, wk) = query_grid, key_grid
    sh, sw = -(-hq // hk), -(-wq // wk)
    rows = torch.arange(hq).div(sh, rounding_mode='floor').clamp(max=hk - 1)
    cols = torch.arange(wq).div(sw, rounding_mode='floor').clamp(max=wk - 1)
    key_of_query = (rows[:, None] * wk + cols[None, :]).flatten()  # (Hq*Wq,)
    spread = torch.zeros(num_cls + hk * wk, num_cls + hq * wq)
    spread[:num_cls, :num_cls] = torch.eye(num_cls)
    spread[num_cls + key_of_query, num_cls + torch.arange(hq * wq)] = 1.0
    return spread / spread.sum(dim=1, keepdim=True).clamp_min(1)


def square_cvt_attention(amap: AttentionMap) -> Tensor:
    """(B, heads, N_q, N_q) attention over query positions (identity for a square map)."""
    if amap.key_grid == amap.query_grid:
        return amap.probs
    spread = spread_matrix(amap.query_grid, amap.key_grid, amap.num_cls).to(amap.probs)
    return amap.probs @ spread


def attention_rollout(probs: Sequence[Tensor], head_fusion: str = 'mean', residual: bool = True) -> Tensor:
    """Roll out a sequence of square attention maps (first block first).

    Args:
        probs: per block (B, heads, N, N), rows sum to 1.
        head_fusion: 'mean' (the paper) or 'max' over heads (then rows are re-normalised).
        residual: add the identity for the skip connection, ``(A + I) / 2``.
    Returns:
        (B, N, N), rows sum to 1.
    """
    if not probs:
        raise ValueError('attention_rollout needs at least one block')
    result = None
    for p in probs:
        if p.shape[-1] != p.shape[-2]:
            raise ValueError(f'attention of shape {tuple(p.shape)} is not square; CvT maps go through '
                             'square_cvt_attention first')
        if head_fusion == 'mean':
            a = p.mean(dim=1)
        elif head_fusion == 'max':
            a = p.amax(dim=1)
        else:
            raise ValueError(f"head_fusion={head_fusion!r}: use 'mean' or 'max'")
        if residual:
            a = a + torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        a = a / a.sum(dim=-1, keepdim=True)
        result = a if result is None else a @ result
    return result


def rollout_of_maps(maps: Sequence[AttentionMap], head_fusion: str = 'mean') -> tuple[Tensor, AttentionMap]:
    """Rollout over the blocks that share the last block's query grid (all blocks of a BEiT; CvT: its last stage).

    Returns:
        the rollout (B, N, N) and the last block's map (for its grids and cls count).
    """
    last = maps[-1]
    stage = [m for m in maps if m.query_grid == last.query_grid and m.num_cls == last.num_cls]
    return attention_rollout([square_cvt_attention(m) for m in stage], head_fusion), last
