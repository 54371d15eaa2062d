"""Attention probabilities of BEiT and CvT blocks, recorded with forward hooks that recompute the eager path's
``softmax(q k^T * scale + bias)`` from each attention module's inputs and weights (the forward is unchanged).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..models.layers.attention import BEiTAttention
from ..models.layers.conv_attention import ConvProjectionAttention
from ..models.layers.mask_utils import conv_output_size
from ..models.layers.rel_pos_bias import gather_relative_position_bias


@dataclass
class AttentionMap:
    """One block's attention.

    Attributes:
        name: the attention module's name in the model (e.g. ``blocks.3.attn``, ``stage2.blocks.9.attn``).
        probs: (B, heads, num_cls + Hq*Wq, num_cls + Hk*Wk), rows sum to 1.
        values: (B, heads, num_cls + Hk*Wk, C / heads), the values the probabilities mix (for checks).
        query_grid: (Hq, Wq) token grid of the queries.
        key_grid: (Hk, Wk) token grid of the keys (CvT: the stride-2 projection's).
        num_cls: leading cls tokens in both axes (0 or 1).
    """
    name: str
    probs: Tensor
    values: Tensor
    query_grid: tuple[int, int]
    key_grid: tuple[int, int]
    num_cls: int


def beit_attention_probs(attn: BEiTAttention, x: Tensor, grid: tuple[int, int],
                         shared_table: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """BEiT attention probabilities for the module's input ``x`` (B, 1 + h*w, C) on patch ``grid`` (h, w);
    ``shared_table`` is the shared relative position bias table the block received (already on ``grid``).

    Returns:
        probs (B, heads, N, N) and values (B, heads, N, C / heads), N = 1 + h*w.
    """
    b, n, _ = x.shape
    bias = None
    if attn.q_bias is not None:
        bias = torch.cat([attn.q_bias, torch.zeros_like(attn.v_bias), attn.v_bias])
    qkv = F.linear(x, attn.qkv.weight, bias).reshape(b, n, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    logits = (q * attn.scale) @ k.transpose(-2, -1)  # (B, heads, N, N)
    table = attn.bias_table(tuple(grid), shared_table)
    if table is not None:
        logits = logits + gather_relative_position_bias(table, tuple(grid)).unsqueeze(0)
    return logits.softmax(dim=-1), v


def cvt_attention_probs(attn: ConvProjectionAttention, x: Tensor,
                        hw_shape: tuple[int, int]) -> tuple[Tensor, Tensor, tuple[int, int]]:
    """CvT attention probabilities for the module's input ``x`` (B, [1 +] H*W, C) on the ``hw_shape`` (H, W) map.

    Returns:
        probs (B, heads, N_q, N_kv), values (B, heads, N_kv, C / heads) and the key grid (H', W').
    """
    h, w = hw_shape
    b, _, c = x.shape
    num_cls = 1 if attn.with_cls_token else 0
    cls_token, tokens = x[:, :num_cls], x[:, num_cls:]
    fmap = tokens.transpose(1, 2).reshape(b, c, h, w)
    q, k, v = attn.conv_proj_q(fmap), attn.conv_proj_k(fmap), attn.conv_proj_v(fmap)
    conv = attn.conv_proj_k.conv
    key_grid = tuple(conv_output_size(size, conv.kernel_size[i], conv.stride[i], conv.padding[i])
                     for i, size in enumerate((h, w)))
    if num_cls:
        q, k, v = (torch.cat((cls_token, t), dim=1) for t in (q, k, v))
    q, k, v = (attn._split_heads(proj(t)) for proj, t in ((attn.proj_q, q), (attn.proj_k, k), (attn.proj_v, v)))
    probs = ((q @ k.transpose(-2, -1)) * attn.scale).softmax(dim=-1)
    return probs, v, key_grid


ATTENTION_TYPES = (BEiTAttention, ConvProjectionAttention)


class AttentionRecorder:
    """Context manager: while active, every forward of the model's attention modules appends an :class:`AttentionMap`
    to ``self.maps``, in forward order. Record in eval mode (CvT's BatchNorm would update twice).

    Example::

        with AttentionRecorder(backbone) as rec:
            backbone(images)
        rec.maps[-1].probs   # last block, (B, heads, N, N)
    """

    def __init__(self, model: nn.Module) -> None:
        self.modules = [(name, m) for name, m in model.named_modules() if isinstance(m, ATTENTION_TYPES)]
        if not self.modules:
            raise ValueError(f'{type(model).__name__} has no BEiTAttention or ConvProjectionAttention module; '
                             'attention maps are recorded for beit_mm.BEiT and beit_mm.CvT backbones')
        self.maps: list[AttentionMap] = []
        self._handles: list = []

    def _hook(self, name: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Tensor) -> None:
            if module.training and isinstance(module, ConvProjectionAttention):
                raise RuntimeError('recording CvT attention in training mode would update BatchNorm running stats '
                                   'twice; call model.eval() first')
            with torch.no_grad():
                if isinstance(module, BEiTAttention):
                    x, grid = args[0], tuple(args[1] if len(args) > 1 else kwargs['grid'])
                    shared = args[2] if len(args) > 2 else kwargs.get('shared_table')
                    probs, values = beit_attention_probs(module, x, grid, shared)
                    self.maps.append(AttentionMap(name, probs, values, grid, grid, 1))
                else:
                    x = args[0]
                    hw = tuple(args[1] if len(args) > 1 else kwargs['hw_shape'])
                    probs, values, key_grid = cvt_attention_probs(module, x, hw)
                    self.maps.append(AttentionMap(name, probs, values, hw, key_grid, int(module.with_cls_token)))
        return hook

    def __enter__(self) -> 'AttentionRecorder':
        self.maps = []
        self._handles = [m.register_forward_hook(self._hook(name), with_kwargs=True) for name, m in self.modules]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def record_attention(backbone: nn.Module, images: Tensor) -> list[AttentionMap]:
    """Run ``backbone(images)`` in eval mode without gradients and return every block's :class:`AttentionMap`."""
    was_training = backbone.training
    backbone.eval()
    try:
        with torch.no_grad(), AttentionRecorder(backbone) as rec:
            backbone(images)
    finally:
        backbone.train(was_training)
    return rec.maps


def query_attention(amap: AttentionMap, query: tuple[int, int] | None, sample: int = 0) -> Tensor:
    """Per-head attention of one query over the key grid: (heads, Hk, Wk).

    Args:
        amap: a recorded block.
        query: (row, col) of the query patch on ``amap.query_grid``, or None for the cls token.
        sample: batch index.
    """
    hq, wq = amap.query_grid
    if query is None:
        if not amap.num_cls:
            raise ValueError(f'{amap.name} has no cls token; pass a query patch (row, col)')
        index = 0
    else:
        r, c = query
        if not (0 <= r < hq and 0 <= c < wq):
            raise ValueError(f'query {query} is outside the {hq}x{wq} query grid of {amap.name}')
        index = amap.num_cls + r * wq + c
    return amap.probs[sample, :, index, amap.num_cls:].reshape(-1, *amap.key_grid)
