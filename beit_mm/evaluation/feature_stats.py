"""Per-block feature and parameter statistics of a BEiT, to set a pretrained start beside a random init (features
larger or all alike, layer scales grown or shrunk, a dominating relative position bias)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .probe import extract_dense_features, feature_module


def token_cosine(features: Tensor) -> float:
    """Mean cosine similarity between distinct patch tokens of the same image, averaged over images.

    Args:
        features: (N, C, h, w) patch features.

    Returns:
        float in [-1, 1]: 1 when every token of an image points the same way (collapse), ~0 for unrelated tokens.
    """
    z = nn.functional.normalize(features.flatten(2).transpose(1, 2).double(), dim=-1)  # (N, n, C)
    n = z.shape[1]
    total = z.sum(1).pow(2).sum(-1)  # |sum_i z_i|^2 = n + sum_{i != j} z_i . z_j
    return float(((total - n) / (n * (n - 1))).mean())


@torch.no_grad()
def feature_statistics(model: nn.Module, images: Tensor, batch_size: int = 64) -> dict[str, list[float]]:
    """Per block of the model's BEiT (``feature_module``): the frozen features of ``images`` and the block's weights.

    Args:
        model: a segmentor (or backbone) whose feature module has ``blocks`` (beit_mm's BEiT).
        images: (N, 3, S, S) float RGB 0..255.

    Returns:
        dict of lists, one value per block: ``rms`` of the patch-token outputs, ``token_cosine``, ``gamma_1`` /
        ``gamma_2`` (mean |layer scale|; empty without) and ``rel_pos_bias_std`` (empty without).
    """
    module = feature_module(model)
    blocks = list(module.blocks)
    maps = extract_dense_features(model, images, list(range(len(blocks))), batch_size)  # (N, L * C, h, w)
    stats: dict[str, list[float]] = dict(rms=[], token_cosine=[], gamma_1=[], gamma_2=[], rel_pos_bias_std=[])
    for features in maps.chunk(len(blocks), dim=1):
        stats['rms'].append(float(features.double().pow(2).mean().sqrt()))
        stats['token_cosine'].append(token_cosine(features))
    shared = getattr(module, 'rel_pos_bias', None)
    for block in blocks:
        for name in ('gamma_1', 'gamma_2'):
            value = getattr(block, name, None)
            if isinstance(value, Tensor):
                stats[name].append(float(value.abs().mean()))
        table = getattr(block.attn, 'relative_position_bias_table', None)
        if table is None and shared is not None:
            table = shared.relative_position_bias_table
        if table is not None:
            stats['rel_pos_bias_std'].append(float(table.std()))
    return stats
