"""BEiT multi-head self-attention: q/v bias (no k bias), optional per-block relative position bias, SDPA or eager."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .rel_pos_bias import gather_relative_position_bias, num_relative_distance, resize_rel_pos_bias_table


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
        fused_attn: use ``F.scaled_dot_product_attention`` (True) or the explicit softmax(QK^T) path (False).
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 grid: tuple[int, int] | None = None,
                 qv_bias: bool = True,
                 attn_drop: float = 0.0,
                 proj_drop: float = 0.0,
                 fused_attn: bool = True) -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        self.num_heads = num_heads
        self.scale = (embed_dims // num_heads) ** -0.5
        self.fused_attn = fused_attn
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

    def forward(self, x: Tensor, grid: tuple[int, int], rel_pos_bias: Tensor | None = None) -> Tensor:
        """x: (B, 1 + Wh*Ww, C) with the cls token first; grid: the input's (Wh, Ww); rel_pos_bias: a shared bias
        (heads, N, N) added to this block's own. Returns (B, N, C)."""
        b, n, c = x.shape
        bias = None
        if self.q_bias is not None:
            bias = torch.cat([self.q_bias, torch.zeros_like(self.v_bias), self.v_bias])
        qkv = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, N, C/heads)

        attn_bias = None
        if self.relative_position_bias_table is not None:
            table = resize_rel_pos_bias_table(self.relative_position_bias_table, self.grid, grid)
            attn_bias = gather_relative_position_bias(table, grid)
        if rel_pos_bias is not None:
            attn_bias = rel_pos_bias if attn_bias is None else attn_bias + rel_pos_bias
        if attn_bias is not None:
            attn_bias = attn_bias.unsqueeze(0).to(q.dtype)

        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_bias, dropout_p=self.attn_drop.p if self.training else 0.0, scale=self.scale)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            if attn_bias is not None:
                attn = attn + attn_bias
            attn = self.attn_drop(attn.softmax(dim=-1))
            x = attn @ v
        x = x.transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(x))
