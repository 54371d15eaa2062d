"""Masks on token grids of different strides (pure functions); bool, True = masked, row-major."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def upsample_mask(mask: Tensor, size: tuple[int, int]) -> Tensor:
    """Nearest upsampling of a (B, h, w) bool mask to (B, H, W), H and W multiples of h and w."""
    if mask.dim() != 3:
        raise ValueError(f'mask must be (B, h, w), got shape {tuple(mask.shape)}')
    (h, w), (out_h, out_w) = mask.shape[1:], size
    if out_h % h or out_w % w:
        raise ValueError(f'the {h}x{w} mask grid does not divide the {out_h}x{out_w} token grid; choose an image size '
                         f'that is a multiple of the mask patch size (e.g. 224 for 16 px patches: 14x14 -> 56x56)')
    return mask.bool().repeat_interleave(out_h // h, dim=1).repeat_interleave(out_w // w, dim=2)


def conv_output_size(size: int, kernel_size: int, stride: int, padding: int) -> int:
    """Length of a convolution's output along one axis: ``floor((size + 2 * padding - kernel_size) / stride) + 1``."""
    return (size + 2 * padding - kernel_size) // stride + 1


def leaked_pixels(mask: Tensor, image_size: tuple[int, int], kernel_size: int, stride: int, padding: int) -> Tensor:
    """Pixels of masked patches that a visible token of an overlapping conv embedding reads.

    Args:
        mask: (B, h, w) bool patch mask, True = masked.
        image_size: (H, W) pixels, multiples of (h, w).
        kernel_size, stride, padding: the token embedding convolution.
    Returns:
        (B, H, W) bool.
    """
    height, width = image_size
    grid = (conv_output_size(height, kernel_size, stride, padding), conv_output_size(width, kernel_size, stride,
                                                                                    padding))
    visible = (~upsample_mask(mask, grid)).float().unsqueeze(1)  # (B, 1, H_0, W_0)
    ones = torch.ones(1, 1, kernel_size, kernel_size, dtype=visible.dtype, device=visible.device)
    # transposed conv = scatter each visible token's receptive field back onto the pixel grid
    out_padding = [size - ((g - 1) * stride - 2 * padding + kernel_size) for size, g in zip(image_size, grid)]
    seen = F.conv_transpose2d(visible, ones, stride=stride, padding=padding, output_padding=out_padding)[:, 0] > 0
    return seen & upsample_mask(mask, image_size)
