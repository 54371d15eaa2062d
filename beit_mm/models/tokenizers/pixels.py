"""Pixel targets for MIM: BEiT's pixel-regression baseline with MAE's per-patch normalization (``models_mae.py``)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from beit_mm.registry import MODELS

# MAE models_mae.py forward_loss: (target - mean) / (var + 1.e-6)**.5
NORM_PIX_EPS = 1e-6


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """MAE ``patchify``: (B, C, H, W) -> (B, H/p * W/p, p * p * C), patches row-major, values (row, col, channel)."""
    b, c, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise ValueError(f'image size {h}x{w} is not divisible by the patch size {p}')
    x = images.reshape(b, c, h // p, p, w // p, p)
    return torch.einsum('nchpwq->nhwpqc', x).reshape(b, (h // p) * (w // p), p * p * c)


@MODELS.register_module()
class PatchPixelTarget(nn.Module):
    """Per-patch normalized pixels of the backbone view as MIM targets (no parameters).

    Args:
        patch_size, in_channels: the backbone's patch side in pixels and the image channels.
        norm_pix: normalize each patch to zero mean and unit variance (MAE's ``norm_pix_loss``).
    """

    def __init__(self, patch_size: int, in_channels: int = 3, norm_pix: bool = True) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.norm_pix = norm_pix

    @torch.no_grad()
    def get_targets(self, inputs: dict[str, Tensor]) -> Tensor:
        """``inputs['images']`` (B, C, H, W), the normalized backbone view -> float (B, H/p * W/p, p * p * C)."""
        images = inputs['images']
        if images.shape[1] != self.in_channels:
            raise ValueError(f'PatchPixelTarget(in_channels={self.in_channels}) got images with {images.shape[1]} '
                             'channels')
        target = patchify(images.float(), self.patch_size)
        if self.norm_pix:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)  # unbiased, as MAE's torch.var default
            target = (target - mean) / (var + NORM_PIX_EPS)**.5
        return target
