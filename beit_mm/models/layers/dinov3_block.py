"""The DINOv3 block (facebookresearch/dinov3 @ 6876159 ``dinov3/layers/block.py``).

Pre-norm attention with RoPE on the patch tokens, then a GELU or SwiGLU MLP, each with a layer scale. The released
ViTs mask the key bias to zero, so the qkv bias is ``[q_bias, 0, v_bias]`` as in BEiT.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks import DropPath
from torch import Tensor, nn

from .attention import select_attn_impl
from .mlp import Mlp
from .rope import apply_rope

DINOV3_ATTN_IMPLS = ('auto', 'sdpa', 'eager')
FFN_LAYERS = ('mlp', 'swiglu')


class SwiGLU(nn.Module):
    """``w3(silu(w1 x) * w2 x)``, hidden ``int(hidden_features * 2 / 3)`` rounded up to ``align_to``; (..., C)."""

    def __init__(self, in_features: int, hidden_features: int, align_to: int = 8) -> None:
        super().__init__()
        d = int(hidden_features * 2 / 3)
        hidden = d + (-d % align_to)
        self.w1 = nn.Linear(in_features, hidden)
        self.w2 = nn.Linear(in_features, hidden)
        self.w3 = nn.Linear(hidden, in_features)

    def forward(self, x: Tensor) -> Tensor:
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


class DINOv3Attention(nn.Module):
    """Multi-head self-attention with RoPE on the patch tokens' q and k.

    Args:
        embed_dims, num_heads: token width C and heads (head width a multiple of 4).
        qv_bias: learn ``q_bias`` and ``v_bias``.
        attn_drop, proj_drop, attn_impl: as :class:`BEiTAttention`'s (``'auto'``, ``'sdpa'`` or ``'eager'``).
    """

    def __init__(self, embed_dims: int, num_heads: int, qv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0, attn_impl: str = 'auto') -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        if attn_impl not in DINOV3_ATTN_IMPLS:
            raise ValueError(f'attn_impl={attn_impl!r} is not one of {DINOV3_ATTN_IMPLS} for a DINOv3 block')
        self.num_heads = num_heads
        self.scale = (embed_dims // num_heads) ** -0.5
        self.attn_impl = attn_impl
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(embed_dims)) if qv_bias else None
        self.v_bias = nn.Parameter(torch.zeros(embed_dims)) if qv_bias else None
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], attn_mask: Tensor | None = None) -> Tensor:
        """x: (B, T, C), the last h*w tokens the patches; rope: (sin, cos), (h*w, D) each;
        attn_mask: (B, T, T) bool, True = may attend. Returns (B, T, C)."""
        b, n, c = x.shape
        bias = None
        if self.q_bias is not None:
            bias = torch.cat([self.q_bias, torch.zeros_like(self.v_bias), self.v_bias])
        qkv = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, T, D)
        q, k = apply_rope(q, k, rope)
        impl = self.attn_impl
        if impl == 'auto':
            impl = select_attn_impl(q.device.type, torch.is_grad_enabled() and q.requires_grad)
        mask = attn_mask[:, None] if attn_mask is not None else None  # (B, 1, T, T)
        if impl == 'sdpa':
            dropout_p = self.attn_drop.p if self.training else 0.0
            x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=self.scale)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            if mask is not None:
                attn = attn.masked_fill(~mask, float('-inf'))
            x = self.attn_drop(attn.softmax(dim=-1)) @ v
        return self.proj_drop(self.proj(x.transpose(1, 2).reshape(b, n, c)))


class DINOv3Block(nn.Module):
    """``x + drop_path(gamma_1 * attn(norm1(x), rope))`` then ``x + drop_path(gamma_2 * mlp(norm2(x)))``.

    Args:
        ffn: ``'mlp'`` or ``'swiglu'``; ``swiglu_align``: its hidden width alignment.
        qv_bias: q and v biases.
        embed_dims, num_heads, mlp_ratio, layer_scale_init_value, drop_path, attn_impl, norm_eps: as ``BEiTBlock``'s.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 mlp_ratio: float = 4.0,
                 ffn: str = 'mlp',
                 swiglu_align: int = 8,
                 qv_bias: bool = True,
                 layer_scale_init_value: float = 1e-5,
                 drop_path: float = 0.0,
                 attn_drop: float = 0.0,
                 drop: float = 0.0,
                 attn_impl: str = 'auto',
                 norm_eps: float = 1e-5) -> None:
        super().__init__()
        if ffn not in FFN_LAYERS:
            raise ValueError(f'ffn={ffn!r} is not one of {FFN_LAYERS}')
        self.norm1 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.attn = DINOv3Attention(embed_dims, num_heads, qv_bias=qv_bias, attn_drop=attn_drop, proj_drop=drop,
                                    attn_impl=attn_impl)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(embed_dims, eps=norm_eps)
        hidden = int(embed_dims * mlp_ratio)
        self.mlp = Mlp(embed_dims, hidden, drop=drop) if ffn == 'mlp' else SwiGLU(embed_dims, hidden, swiglu_align)
        if layer_scale_init_value > 0:
            self.gamma_1 = nn.Parameter(layer_scale_init_value * torch.ones(embed_dims))
            self.gamma_2 = nn.Parameter(layer_scale_init_value * torch.ones(embed_dims))
        else:
            self.gamma_1 = self.gamma_2 = None

    def forward(self, x: Tensor, grid: tuple[int, int], rope: tuple[Tensor, Tensor], num_queries: int = 0,
                attn_mask: Tensor | None = None) -> Tensor:
        """(B, K + P + h*w, C) -> the same shape; arguments as ``BEiTBlock.forward``, ``rope`` (sin, cos)."""
        y = self.attn(self.norm1(x), rope, attn_mask)
        x = x + self.drop_path(y if self.gamma_1 is None else self.gamma_1 * y)
        y = self.mlp(self.norm2(x))
        return x + self.drop_path(y if self.gamma_2 is None else self.gamma_2 * y)
