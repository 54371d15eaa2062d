"""BEiT multi-head self-attention: q/v bias (no k bias), optional relative position bias, SDPA or eager kernel.

Kernel choice (``attn_impl='auto'``, the default): the measured-fastest correct kernel per device and mode. Time of
one ``BEiTAttention`` of BEiT-B (768 wide, 12 heads, learnable relative position bias, q/k/v and output projections
included) with SDPA over the time with eager, median of alternating rounds
(``tools/analysis/benchmark_attention.py``; AMD EPYC Zen 5 with AVX512-BF16, no AMX, 2 shared cores, torch 2.13):

| device | dtype | train (forward + backward) | inference (forward) | auto picks |
|---|---|---|---|---|
| CPU | float32 | N=197 (batch 8) x1.08; N=1601 (batch 1) x1.05 | N=197 x0.81; N=1601 x0.64 | eager / sdpa |
| CPU | bfloat16 | N=197 x2.00; N=1601 x2.68* | N=197 x0.92; N=1601 x0.75* | eager / sdpa |
| CUDA | any | not measured (no GPU lent) | not measured | sdpa, memory-efficient |

(* the attention kernel alone, without the projections: the full-module run at N=1601 in bf16 did not finish within
the time box on the shared machine.) ``tools/analysis/gpu_report.sh`` measures the CUDA rows.

PyTorch's CPU SDPA kernel (flash attention for CPU) is fast forward but its backward with a float mask that needs a
gradient is slower than two matmuls and a softmax, in bf16 by 2-3x; so training on CPU uses the eager path (the one
mmseg's and mmpretrain's BEiT use). On CUDA, biased attention is pinned to the memory-efficient kernel (with the math
kernel as fallback): flash attention takes no float mask, and cuDNN attention (the default on H100/H200 with cuDNN
>= 9.15) has NaN-gradient and mask-dtype reports with masks (pytorch/pytorch#196678, #191612); ``tools/analysis/
gpu_report.sh`` re-checks the chosen kernel against eager on the GPU. The bias is gathered once per
forward per block, already in the compute dtype and with an 8-aligned row stride so that kernel uses it without a
copy.

Two more kernels are selectable for CUDA, where they are candidates for the default once measured
(``tools/analysis/benchmark_attention.py --impls sdpa cudnn flex``, run by ``gpu_report.sh``): ``'flex'``,
FlexAttention with the bias as a ``score_mod`` that reads the table through the relative position index inside the
kernel (the (heads, N, N) bias is never materialized; the table's gradient is the captured buffer's), and
``'cudnn'``, SDPA pinned to cuDNN attention with the gathered bias. On CPU torch 2.13 has no FlexAttention backward
("FlexAttention does not support backward on CPU"), so there ``'flex'`` serves inference only (the equality tests check
its forward on CPU, and forward and gradients on CUDA); CPU times of all three: docs/studies/compile-and-attention.md.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import flex_attention

from .rel_pos_bias import (flat_relative_position_index, gather_relative_position_bias, num_relative_distance,
                           resize_rel_pos_bias_table, with_query_rows)

ATTN_IMPLS = ('auto', 'sdpa', 'eager', 'flex', 'cudnn')
# Row alignment (elements) of the gathered bias that CUDA's memory-efficient SDPA kernel takes without copying.
SDPA_BIAS_ALIGN = 8
# Biased attention on CUDA: memory-efficient kernel, math as the fallback (see the module docstring).
BIASED_SDPA_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# attn_impl='cudnn': cuDNN attention, the memory-efficient kernel where cuDNN refuses the inputs.
CUDNN_SDPA_BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
# FlexAttention runs as generated kernels only when compiled; its eager form (the CPU path) is a reference loop.
_compiled_flex_attention = torch.compile(flex_attention, dynamic=False)


def select_attn_impl(device_type: str, needs_grad: bool) -> str:
    """``'sdpa'`` or ``'eager'``: what ``attn_impl='auto'`` runs (the module docstring's table; on CPU the choice
    was the same for fp32 and bf16 and for 197 and 1601 tokens)."""
    if device_type != 'cpu':
        return 'sdpa'
    return 'eager' if needs_grad else 'sdpa'


class BEiTAttention(nn.Module):
    """Self-attention of a BEiT block with checkpoint-native parameter names.

    Parameters: ``qkv.weight`` (3C, C) without bias, ``q_bias``/``v_bias`` (C,) (the key bias is zero),
    ``relative_position_bias_table`` ((2Wh-1)(2Ww-1)+3, heads) when ``grid`` is given, ``proj``.

    Args:
        embed_dims: token width C.
        num_heads: attention heads; head width C // num_heads.
        grid: patch grid (Wh, Ww) of a per-block relative position bias, or None for none.
        qv_bias: learn q and v biases.
        attn_drop: dropout on attention probabilities.
        proj_drop: dropout after the output projection.
        attn_impl: ``'auto'`` (the measured-fastest kernel for the device, dtype and whether gradients are needed;
            see the module docstring), ``'sdpa'`` (``F.scaled_dot_product_attention``) or ``'eager'`` (explicit
            softmax(QK^T + bias) V). All compute the same function.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 grid: tuple[int, int] | None = None,
                 qv_bias: bool = True,
                 attn_drop: float = 0.0,
                 proj_drop: float = 0.0,
                 attn_impl: str = 'auto') -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f'attn_impl={attn_impl!r} is not one of {ATTN_IMPLS}')
        if attn_impl == 'flex' and attn_drop:
            raise ValueError(f"attn_impl='flex' has no attention dropout (attn_drop={attn_drop}); use 'sdpa' or "
                             "'eager', or attn_drop=0.0 (every BEiT recipe's)")
        self.num_heads = num_heads
        self.scale = (embed_dims // num_heads) ** -0.5
        self.attn_impl = attn_impl
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=False)
        if qv_bias:
            self.q_bias = nn.Parameter(torch.zeros(embed_dims))
            self.v_bias = nn.Parameter(torch.zeros(embed_dims))
        else:
            self.q_bias = self.v_bias = None
        self.grid = tuple(grid) if grid is not None else None
        if self.grid is not None:
            self.relative_position_bias_table = nn.Parameter(torch.zeros(num_relative_distance(self.grid), num_heads))
        else:
            self.relative_position_bias_table = None
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def bias_table(self, grid: tuple[int, int], shared_table: Tensor | None) -> Tensor | None:
        """This block's table resampled to ``grid`` plus the shared one: (num_relative_distance(grid), heads)."""
        table = None
        if self.relative_position_bias_table is not None:
            table = resize_rel_pos_bias_table(self.relative_position_bias_table, self.grid, grid)
        if shared_table is not None:
            table = shared_table if table is None else table + shared_table
        return table

    def forward(self, x: Tensor, grid: tuple[int, int], shared_table: Tensor | None = None, num_queries: int = 0,
                attn_mask: Tensor | None = None) -> Tensor:
        """x: (B, K + 1 + Wh*Ww, C): ``num_queries`` (K) query tokens (EoMT's; 0 without), then the cls token, then
        the patches; grid: the input's (Wh, Ww); shared_table: a shared relative position bias table already
        resampled to ``grid`` (num_relative_distance(grid), heads), added to this block's own before the bias is
        gathered. The queries take the cls token's rows and columns of the bias (:func:`with_query_rows`).
        attn_mask: (B, T, T) bool, True = may attend, or None. Returns (B, T, C)."""
        b, n, c = x.shape
        bias = None
        if self.q_bias is not None:
            bias = torch.cat([self.q_bias, torch.zeros_like(self.v_bias), self.v_bias])
        qkv = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, N, C/heads)

        impl = self.attn_impl
        if impl == 'auto':
            impl = select_attn_impl(q.device.type, torch.is_grad_enabled() and q.requires_grad)
        table = self.bias_table(grid, shared_table)
        if impl == 'flex':
            x = flex_biased_attention(q, k, v, table, grid, num_queries, attn_mask, self.scale)
            return self.proj_drop(self.proj(x.transpose(1, 2).reshape(b, n, c)))
        attn_bias = None
        if table is not None:  # (1, heads, N, N), gathered once, cast to q's dtype
            align = SDPA_BIAS_ALIGN if impl in ('sdpa', 'cudnn') else 1
            attn_bias = gather_relative_position_bias(table, grid, align, dtype=q.dtype)
            attn_bias = with_query_rows(attn_bias, num_queries).unsqueeze(0)
        if attn_mask is not None:  # (B, heads, T, T): the bias where allowed, -inf where not
            base = attn_bias if attn_bias is not None else q.new_zeros((1, 1, n, n))
            attn_bias = base.masked_fill(~attn_mask[:, None], float('-inf'))

        if impl in ('sdpa', 'cudnn'):
            dropout_p = self.attn_drop.p if self.training else 0.0
            if q.device.type == 'cuda' and (attn_bias is not None or impl == 'cudnn'):
                with sdpa_kernel(CUDNN_SDPA_BACKENDS if impl == 'cudnn' else BIASED_SDPA_BACKENDS):
                    x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias, dropout_p=dropout_p,
                                                       scale=self.scale)
            else:
                x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias, dropout_p=dropout_p,
                                                   scale=self.scale)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            if attn_bias is not None:
                attn = attn + attn_bias
            attn = self.attn_drop(attn.softmax(dim=-1))
            x = attn @ v
        x = x.transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(x))


def flex_biased_attention(q: Tensor, k: Tensor, v: Tensor, table: Tensor | None, grid: tuple[int, int],
                          num_queries: int, attn_mask: Tensor | None, scale: float) -> Tensor:
    """softmax(scale * q k^T + bias, masked) v with FlexAttention: (B, heads, T, D) each -> (B, heads, T, D).

    The bias is read inside the kernel: ``table[index[i', j'], h]`` with ``index = relative_position_index(grid)``
    ((1 + N, 1 + N), cls first) and ``i' = max(i - K, 0)`` (the ``K = num_queries`` queries take the cls token's rows
    and columns, :func:`with_query_rows`); ``attn_mask`` (B, T, T) bool, True = may attend, sets the others to -inf.
    The same function as the SDPA and eager paths of :class:`BEiTAttention`."""
    mods = []
    if table is not None:
        n = grid[0] * grid[1] + 1
        index = flat_relative_position_index(tuple(grid), n, q.device).view(n, n)

        def add_bias(score, b, h, i, j):
            row = index[(i - num_queries).clamp(min=0), (j - num_queries).clamp(min=0)]
            return score + table[row, h].to(score.dtype)

        mods.append(add_bias)
    if attn_mask is not None:
        def apply_mask(score, b, h, i, j):
            return torch.where(attn_mask[b, i, j], score, -float('inf'))

        mods.append(apply_mask)

    def score_mod(score, b, h, i, j):
        for mod in mods:
            score = mod(score, b, h, i, j)
        return score

    run = _compiled_flex_attention if q.device.type == 'cuda' and not torch.compiler.is_compiling() else flex_attention
    return run(q, k, v, score_mod=score_mod if mods else None, scale=scale)
