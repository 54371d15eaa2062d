"""A BEiT transformer block: pre-norm attention and MLP, each with layer scale (gamma) and drop path."""
from __future__ import annotations

import torch
from mmcv.cnn.bricks import DropPath
from torch import Tensor, nn

from .attention import BEiTAttention
from .mlp import Mlp


class BEiTBlock(nn.Module):
    """``x + drop_path(gamma_1 * attn(norm1(x)))`` then ``x + drop_path(gamma_2 * mlp(norm2(x)))``; unilm names.

    Args:
        embed_dims, num_heads, mlp_ratio: token width C, attention heads, MLP hidden width / C.
        grid: patch grid of a per-block relative position bias, or None.
        layer_scale_init_value: initial gamma; 0 disables layer scale.
        drop_path, attn_impl, norm_eps: stochastic depth rate, :class:`BEiTAttention`'s kernel, LayerNorm epsilon.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 mlp_ratio: float = 4.0,
                 grid: tuple[int, int] | None = None,
                 layer_scale_init_value: float = 0.0,
                 drop_path: float = 0.0,
                 attn_drop: float = 0.0,
                 drop: float = 0.0,
                 attn_impl: str = 'auto',
                 norm_eps: float = 1e-6) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.attn = BEiTAttention(embed_dims, num_heads, grid, attn_drop=attn_drop, proj_drop=drop,
                                  attn_impl=attn_impl)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), drop=drop)
        if layer_scale_init_value > 0:
            self.gamma_1 = nn.Parameter(layer_scale_init_value * torch.ones(embed_dims))
            self.gamma_2 = nn.Parameter(layer_scale_init_value * torch.ones(embed_dims))
        else:
            self.gamma_1 = self.gamma_2 = None

    def forward(self, x: Tensor, grid: tuple[int, int], shared_table: Tensor | None = None, num_queries: int = 0,
                attn_mask: Tensor | None = None) -> Tensor:
        """(B, K + 1 + Wh*Ww, C) -> the same shape; the other arguments as :meth:`BEiTAttention.forward`."""
        y = self.attn(self.norm1(x), grid, shared_table, num_queries, attn_mask)
        x = x + self.drop_path(y if self.gamma_1 is None else self.gamma_1 * y)
        y = self.mlp(self.norm2(x))
        return x + self.drop_path(y if self.gamma_2 is None else self.gamma_2 * y)
