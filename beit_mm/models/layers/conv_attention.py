"""CvT's convolutional-projection self-attention (Wu et al. 2021, sec. 3.2; microsoft/CvT ``cls_cvt.py``).

Depthwise conv + BatchNorm before the q/k/v projections, stride 2 for keys and values; scale ``embed_dims ** -0.5``
(full width), as the official code.
"""
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CONV_ATTN_IMPLS = ('sdpa', 'eager')


class ConvProjection(nn.Sequential):
    """Depthwise conv + BatchNorm: ``(B, C, H, W) -> (B, H' * W', C)``."""

    def __init__(self, embed_dims: int, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__(OrderedDict([
            ('conv',
             nn.Conv2d(
                 embed_dims,
                 embed_dims,
                 kernel_size=kernel_size,
                 stride=stride,
                 padding=padding,
                 groups=embed_dims,
                 bias=False)),
            ('bn', nn.BatchNorm2d(embed_dims)),
        ]))

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x).flatten(2).transpose(1, 2)


class ConvProjectionAttention(nn.Module):
    """Conv projections of q/k/v, multi-head attention, output projection.

    Args:
        embed_dims, num_heads: token width C and heads dividing it.
        with_cls_token: the sequence starts with a cls token that bypasses the conv projections.
        kernel_size, stride_q, stride_kv, padding: the depthwise projections'; ``qkv_bias``: of ``proj_{q,k,v}``.
        attn_impl: ``'sdpa'`` or ``'eager'``; the same function.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 with_cls_token: bool = False,
                 kernel_size: int = 3,
                 stride_q: int = 1,
                 stride_kv: int = 2,
                 padding: int = 1,
                 qkv_bias: bool = True,
                 attn_impl: str = 'sdpa') -> None:
        super().__init__()
        if embed_dims % num_heads != 0:
            raise ValueError(f'embed_dims={embed_dims} is not divisible by num_heads={num_heads}; '
                             'pick num_heads that divides the stage width')
        if attn_impl not in CONV_ATTN_IMPLS:
            raise ValueError(f'attn_impl={attn_impl!r} is not one of {CONV_ATTN_IMPLS} for CvT attention')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.with_cls_token = with_cls_token
        self.attn_impl = attn_impl
        self.scale = embed_dims**-0.5

        self.conv_proj_q = ConvProjection(embed_dims, kernel_size, stride_q, padding)
        self.conv_proj_k = ConvProjection(embed_dims, kernel_size, stride_kv, padding)
        self.conv_proj_v = ConvProjection(embed_dims, kernel_size, stride_kv, padding)
        self.proj_q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj_k = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj_v = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_heads, -1).transpose(1, 2)

    def forward(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """(B, N, C) tokens of an (H, W) map, row-major, cls token first when ``with_cls_token`` -> (B, N, C)."""
        H, W = hw_shape
        B, N, C = x.shape
        num_cls = 1 if self.with_cls_token else 0
        if N != H * W + num_cls:
            raise ValueError(f'got {N} tokens for a {H}x{W} map with with_cls_token={self.with_cls_token}; '
                             f'expected {H * W + num_cls}')
        cls_token, tokens = x[:, :num_cls], x[:, num_cls:]
        fmap = tokens.transpose(1, 2).reshape(B, C, H, W)

        q = self.conv_proj_q(fmap)  # (B, H*W, C)
        k = self.conv_proj_k(fmap)  # (B, H/2*W/2, C) for stride 2
        v = self.conv_proj_v(fmap)
        if num_cls:
            q = torch.cat((cls_token, q), dim=1)
            k = torch.cat((cls_token, k), dim=1)
            v = torch.cat((cls_token, v), dim=1)

        q = self._split_heads(self.proj_q(q))  # (B, heads, N, C/heads)
        k = self._split_heads(self.proj_k(k))  # (B, heads, N_kv, C/heads)
        v = self._split_heads(self.proj_v(v))

        if self.attn_impl == 'sdpa':
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            attn = (q @ k.transpose(-2, -1)) * self.scale  # (B, heads, N, N_kv)
            out = attn.softmax(dim=-1) @ v
        out = out.transpose(1, 2).reshape(B, N, C)
        return self.proj(out)
