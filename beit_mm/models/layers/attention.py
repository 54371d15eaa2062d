"""BEiT multi-head self-attention: q/v bias (no k bias), optional relative position bias, four kernels.

``attn_impl``: ``'eager'`` (as unilm), ``'sdpa'`` (the bias gathered with 8-aligned rows), ``'cudnn'`` (SDPA on cuDNN
attention), ``'flex'`` (FlexAttention reading the bias table in ``score_mod``; SDPA with one warning where no option
set of :data:`FLEX_KERNEL_OPTIONS` compiles) or ``'auto'`` (:func:`select_attn_impl`); the same function.
"""
from __future__ import annotations

import functools
import warnings

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
# Biased attention on CUDA: memory-efficient kernel (flash attention takes no float bias), math as fallback.
BIASED_SDPA_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# attn_impl='cudnn': cuDNN attention, the memory-efficient kernel where cuDNN refuses the inputs.
CUDNN_SDPA_BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


@functools.cache
def _compile_flex_attention():
    return torch.compile(flex_attention, dynamic=False)


def _compiled_flex_attention(*args, **kwargs) -> Tensor:
    """``flex_attention`` compiled at its first call (compiling at import would load TorchDynamo into every process)."""
    return _compile_flex_attention()(*args, **kwargs)


# Devices where FlexAttention runs compiled and so is probed before its first use (:func:`flex_plan`).
PROBED_DEVICES = ('cuda', )
FLEX_KERNEL_OPTIONS = (
    {},
    dict(fwd_BLOCK_M=128, fwd_BLOCK_N=64, fwd_num_stages=3, fwd_num_warps=4,
         bwd_BLOCK_M1=64, bwd_BLOCK_N1=64, bwd_BLOCK_M2=64, bwd_BLOCK_N2=64, bwd_num_stages=3, bwd_num_warps=4),
    dict(fwd_BLOCK_M=64, fwd_BLOCK_N=64, fwd_num_stages=2, fwd_num_warps=4,
         bwd_BLOCK_M1=32, bwd_BLOCK_N1=64, bwd_BLOCK_M2=64, bwd_BLOCK_N2=32, bwd_num_stages=2, bwd_num_warps=4),
    dict(fwd_BLOCK_M=32, fwd_BLOCK_N=32, fwd_num_stages=1, fwd_num_warps=4,
         bwd_BLOCK_M1=16, bwd_BLOCK_N1=16, bwd_BLOCK_M2=16, bwd_BLOCK_N2=16, bwd_num_stages=1, bwd_num_warps=4),
)


def select_attn_impl(device_type: str, needs_grad: bool, dtype: torch.dtype | None = None,
                     masked: bool = False) -> str:
    """What ``'auto'`` runs: on CPU eager with gradients, SDPA without; on CUDA cuDNN for bf16/fp16
    inference without a mask (cuDNN has NaN reports with masks, pytorch/pytorch#196678), SDPA otherwise."""
    if device_type == 'cpu':
        return 'eager' if needs_grad else 'sdpa'
    if device_type == 'cuda' and not needs_grad and not masked and dtype in (torch.bfloat16, torch.float16):
        return 'cudnn'
    return 'sdpa'


def flex_shared_memory(options: dict, head_dim: int, itemsize: int) -> int:
    """A lower bound of FlexAttention's shared memory per block (bytes) under ``options``."""
    o = {'fwd_BLOCK_M': 128, 'fwd_BLOCK_N': 128, 'fwd_num_stages': 3, 'bwd_BLOCK_M1': 64, 'bwd_BLOCK_N1': 128,
         'bwd_BLOCK_M2': 128, 'bwd_BLOCK_N2': 64, 'bwd_num_stages': 3, **options}
    fwd = o['fwd_BLOCK_M'] + 2 * o['fwd_num_stages'] * o['fwd_BLOCK_N']
    bwd = max(2 * o['bwd_BLOCK_N1'] + 2 * o['bwd_num_stages'] * o['bwd_BLOCK_M1'],
              2 * o['bwd_BLOCK_M2'] + 2 * o['bwd_num_stages'] * o['bwd_BLOCK_N2'])
    return max(fwd, bwd) * head_dim * itemsize


def _probe_flex(device: torch.device, dtype: torch.dtype, head_dim: int, train: bool, options: dict) -> None:
    """Compile and run FlexAttention once with ``options`` as :func:`flex_biased_attention` calls it."""
    g = torch.Generator().manual_seed(0)
    n = 197
    q, k, v = (torch.randn(1, 2, n, head_dim, generator=g).to(device, dtype).requires_grad_(train) for _ in range(3))
    table = torch.randn(2 * n, 2, generator=g).to(device).requires_grad_(train)
    index = torch.arange(n * n, device=device).view(n, n) % (2 * n)

    def score_mod(score, b, h, i, j):
        return score + table[index[i, j], h].to(score.dtype)

    with torch.autocast(device.type, enabled=False), torch.enable_grad():
        out = _compiled_flex_attention(q, k, v, score_mod=score_mod, kernel_options=dict(options))
        if train:
            out.float().sum().backward()
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


@functools.cache
def _flex_plan(device_type: str, device_index: int, dtype_name: str, head_dim: int, train: bool) -> int:
    device = torch.device(device_type, device_index) if device_type != 'cpu' else torch.device('cpu')
    what = f'{dtype_name.replace("torch.", "")}, head dim {head_dim}, {"training" if train else "inference"}'
    if device_type not in PROBED_DEVICES:
        if not train:
            return 0
        warnings.warn(f"attn_impl='flex': FlexAttention has no backward on {device_type} in torch "
                      f'{torch.__version__} ({what}); this process uses SDPA for it instead', stacklevel=3)
        return -1
    dtype = getattr(torch, dtype_name.replace('torch.', ''))
    limit = None
    where = device_type
    if device_type == 'cuda':
        props = torch.cuda.get_device_properties(device)
        limit = getattr(props, 'shared_memory_per_block_optin', None)
        where = f'{props.name} ({limit} bytes of shared memory per block)' if limit else props.name
    errors = []
    for i, options in enumerate(FLEX_KERNEL_OPTIONS):
        if limit and options and flex_shared_memory(options, head_dim, dtype.itemsize) > limit:
            continue
        try:
            _probe_flex(device, dtype, head_dim, train, options)
            return i
        except Exception as error:  # noqa: BLE001 -- any compile or launch failure moves to the next options
            errors.append(f'options {i}: {type(error).__name__}: {str(error).strip().splitlines()[0][:160]}')
    warnings.warn(f"attn_impl='flex': FlexAttention did not compile on {where} for {what} with any of "
                  f"{len(FLEX_KERNEL_OPTIONS)} kernel option sets ({'; '.join(errors)}); this process uses SDPA "
                  'for it instead', stacklevel=3)
    return -1


@torch.compiler.assume_constant_result
def flex_plan(device_type: str, device_index: int, dtype_name: str, head_dim: int, train: bool) -> int:
    """The index into :data:`FLEX_KERNEL_OPTIONS` FlexAttention runs with here, or -1 (SDPA); probed once per
    case and process."""
    return _flex_plan(device_type, device_index, dtype_name, head_dim, train)


class BEiTAttention(nn.Module):
    """Self-attention of a BEiT block with unilm's parameter names.

    Args:
        embed_dims, num_heads: token width C and attention heads.
        grid: patch grid (Wh, Ww) of a per-block relative position bias, or None.
        qv_bias: learn q and v biases.
        attn_drop, proj_drop: dropout on the attention probabilities / after ``proj``.
        attn_impl: ``'auto'``, ``'sdpa'``, ``'eager'``, ``'flex'`` or ``'cudnn'``.
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
        """Args:
            x: (B, K + 1 + Wh*Ww, C): K query tokens (EoMT's), the cls token, the patches.
            grid: the input's (Wh, Ww).
            shared_table: a shared bias table resampled to ``grid``, added to this block's own.
            num_queries: K; the queries take the cls token's bias rows and columns.
            attn_mask: (B, T, T) bool, True = may attend, or None.
        Returns:
            (B, T, C).
        """
        b, n, c = x.shape
        bias = None
        if self.q_bias is not None:
            bias = torch.cat([self.q_bias, torch.zeros_like(self.v_bias), self.v_bias])
        qkv = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, N, C/heads)

        impl = self.attn_impl
        needs_grad = torch.is_grad_enabled() and q.requires_grad
        if impl == 'auto':
            impl = select_attn_impl(q.device.type, needs_grad, q.dtype, attn_mask is not None)
        table = self.bias_table(grid, shared_table)
        if impl == 'flex':
            needs_grad = needs_grad or (table is not None and table.requires_grad and torch.is_grad_enabled())
            plan = flex_plan(q.device.type, q.device.index or 0, str(q.dtype), q.shape[-1], needs_grad)
            if plan >= 0:
                x = flex_biased_attention(q, k, v, table, grid, num_queries, attn_mask, self.scale,
                                          FLEX_KERNEL_OPTIONS[plan])
                return self.proj_drop(self.proj(x.transpose(1, 2).reshape(b, n, c)))
            impl = 'sdpa'
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
                          num_queries: int, attn_mask: Tensor | None, scale: float,
                          kernel_options: dict | None = None) -> Tensor:
    """softmax(scale * q k^T + bias, masked) v with FlexAttention: (B, heads, T, D) -> same.

    The bias ``table[index[i', j'], h]`` is read in the kernel, ``i' = max(i - K, 0)`` for ``K = num_queries``
    (:func:`with_query_rows`); ``attn_mask`` (B, T, T) bool, True = may attend.
    """
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

    compiled = q.device.type in PROBED_DEVICES and not torch.compiler.is_compiling()
    run = _compiled_flex_attention if compiled else flex_attention
    options = dict(kernel_options) if kernel_options and (compiled or torch.compiler.is_compiling()) else None
    return run(q, k, v, score_mod=score_mod if mods else None, scale=scale, kernel_options=options)
