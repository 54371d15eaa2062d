"""Convolutional-projection multi-head self-attention of CvT (Wu et al., 2021, "CvT: Introducing Convolutions to
Vision Transformers", sec. 3.2; official code: microsoft/CvT ``lib/models/cls_cvt.py``, class ``Attention``).

Before the usual linear q/k/v projections, the token map is passed through a depthwise 3x3 convolution + BatchNorm
(the paper's "dw_bn" projection), with stride 1 for the queries and stride 2 for the keys/values, which shrinks the
key/value sequence 4x. An optional leading cls token bypasses the convolutions and is concatenated back in front.

Parameter names follow the official checkpoints: ``conv_proj_{q,k,v}.conv.weight`` (depthwise, no bias),
``conv_proj_{q,k,v}.bn.*`` (BatchNorm2d incl. running stats), ``proj_{q,k,v}.*`` and ``proj.*`` (Linear).

Quirk kept for checkpoint parity: the attention scale is ``embed_dims ** -0.5`` (the full width, not the head width),
as in the official code and HF ``CvtSelfAttention``.
"""
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CONV_ATTN_IMPLS = ('sdpa', 'eager')


class ConvProjection(nn.Sequential):
    """Depthwise conv + BatchNorm on a token map, flattened back to tokens (the paper's "dw_bn" projection).

    Args:
        embed_dims: channels C (kept; the conv is depthwise).
        kernel_size: conv kernel size (3 in all CvT models).
        stride: conv stride (1 for queries, 2 for keys/values in CvT).
        padding: conv padding (1 in all CvT models).

    Shapes: ``(B, C, H, W) -> (B, H' * W', C)`` with ``H' = (H + 2 * padding - kernel_size) // stride + 1``.
    """

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
        """(B, C, H, W) -> (B, H' * W', C)."""
        return super().forward(x).flatten(2).transpose(1, 2)


class ConvProjectionAttention(nn.Module):
    """CvT attention: conv projections of q/k/v, multi-head scaled dot-product attention, output projection.

    Args:
        embed_dims: token width C (input and output).
        num_heads: number of heads; must divide ``embed_dims``.
        with_cls_token: whether the sequence starts with one cls token that bypasses the conv projections (CvT: only
            the last stage).
        kernel_size: kernel of the depthwise projections.
        stride_q: stride of the query projection.
        stride_kv: stride of the key/value projections.
        padding: padding of all three projections.
        qkv_bias: bias of ``proj_{q,k,v}`` (True in every released CvT).
        attn_impl: ``'sdpa'`` (``F.scaled_dot_product_attention`` with ``scale=`` set explicitly) or ``'eager'``
            (``softmax(q @ k^T * scale) @ v``); both compute the same function.

    Shapes: ``forward(x: (B, N, C), hw_shape=(H, W)) -> (B, N, C)`` with ``N = H * W (+ 1 with the cls token)``.
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
        # Official CvT and HF: the full width, not the head width (checkpoint parity).
        self.scale = embed_dims**-0.5

        self.conv_proj_q = ConvProjection(embed_dims, kernel_size, stride_q, padding)
        self.conv_proj_k = ConvProjection(embed_dims, kernel_size, stride_kv, padding)
        self.conv_proj_v = ConvProjection(embed_dims, kernel_size, stride_kv, padding)
        self.proj_q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj_k = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj_v = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def _split_heads(self, x: Tensor) -> Tensor:
        """(B, T, C) -> (B, heads, T, C / heads)."""
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_heads, -1).transpose(1, 2)

    def forward(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """Attend over the tokens of an ``H x W`` map (plus the cls token when ``with_cls_token``).

        Args:
            x: tokens (B, N, C), row-major over the map, cls token first when ``with_cls_token``.
            hw_shape: (H, W) of the token map.

        Returns:
            (B, N, C).
        """
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
