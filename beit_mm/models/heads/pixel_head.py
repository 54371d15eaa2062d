"""Pixel-regression MIM head (BEiT sec. 3.3): Linear(C, p * p * C_img) on masked tokens, MSE to patch pixels."""
from __future__ import annotations

import torch
from mmengine.model import BaseModule
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ..layers.weight_init import trunc_normal_within_std_


@MODELS.register_module()
class PixelRegressionHead(BaseModule):
    """Linear pixel decoder on masked patch tokens with an L2 loss.

    Args:
        embed_dims, patch_size, in_channels: token width C, patch side p, image channels.
        init_cfg: None: unilm's pretraining init.
    """

    def __init__(self, embed_dims: int, patch_size: int, in_channels: int = 3, init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = embed_dims
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.decoder = nn.Linear(embed_dims, patch_size * patch_size * in_channels)

    def check_fits(self, width: int, target_generator: nn.Module) -> None:
        """Raise unless the head reads ``width``-wide tokens and predicts the target generator's patches."""
        if self.embed_dims != width:
            raise ValueError(f"head.embed_dims={self.embed_dims} != the backbone's masked-token width {width}")
        if (getattr(target_generator, 'patch_size', None), getattr(target_generator, 'in_channels', None)) != (
                self.patch_size, self.in_channels):
            raise ValueError(f'PixelRegressionHead(patch_size={self.patch_size}, in_channels={self.in_channels}) '
                             f'needs a pixel target generator of the same patch size and channels '
                             f'(beit_mm.PatchPixelTarget), got {type(target_generator).__name__}')

    def init_weights(self) -> None:
        if self.init_cfg is not None:
            super().init_weights()
            return
        with torch.no_grad():
            trunc_normal_within_std_(self.decoder.weight)
            nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: Tensor) -> Tensor:
        """(..., C) -> (..., p * p * in_channels) predicted (normalized) pixels."""
        return self.decoder(tokens)

    def loss(self, patch_tokens: Tensor, target: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """Args:
            patch_tokens: (B, N, C).
            target: (B, N, p * p * in_channels) pixels.
            mask: (B, N) or (B, h, w) bool, True = masked.
        Returns:
            ``loss`` (MSE per masked patch) and ``loss_baseline`` (the same for predicting 0).
        """
        b, n, _ = patch_tokens.shape
        mask = mask.reshape(b, -1)
        if mask.shape[1] != n or target.shape[:2] != (b, n) or target.shape[2] != self.decoder.out_features:
            raise ValueError(f'patch tokens {tuple(patch_tokens.shape)}, target {tuple(target.shape)} and mask '
                             f'{tuple(mask.shape)} disagree; the target generator must give one '
                             f'{self.decoder.out_features}-value target per patch')
        # static shapes (no host sync): decode every patch, the unmasked weigh 0; M = 0 gives NaN
        num_masked = mask.sum()
        pred = self.decoder(patch_tokens).float()  # (B, N, p * p * C)
        labels = target.float()
        loss = torch.where(mask, (pred - labels).pow(2).mean(dim=-1), 0.0).sum() / num_masked
        with torch.no_grad():
            baseline = torch.where(mask, labels.pow(2).mean(dim=-1), 0.0).sum() / num_masked
        return dict(loss=loss, loss_baseline=baseline)
