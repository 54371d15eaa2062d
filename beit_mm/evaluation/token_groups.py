"""What a tokenizer's codes group: how much a patch's token id tells about its class, its colour and its position.

Normalized mutual information (NMI) between each patch's token id and its majority class, its quantized mean colour
and its grid position, and purity; each beside its baseline (shuffled ids; the majority class's share).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .probe import IGNORE_INDEX, patch_labels

COLOUR_LEVELS = 4  # per channel: 64 colour bins


def entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def nmi(a: np.ndarray, b: np.ndarray) -> float:
    """Normalized mutual information ``I(a; b) / sqrt(H(a) H(b))`` of two int arrays of equal length (0 when
    either is constant)."""
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    joint = np.bincount(a * (b.max() + 1) + b, minlength=(a.max() + 1) * (b.max() + 1))
    ha, hb = entropy(np.bincount(a)), entropy(np.bincount(b))
    if ha == 0 or hb == 0:
        return 0.0
    return (ha + hb - entropy(joint)) / float(np.sqrt(ha * hb))


def purity(ids: np.ndarray, labels: np.ndarray) -> float:
    """Share of patches whose label is the most frequent label among the patches of their id."""
    _, ids = np.unique(ids, return_inverse=True)
    k = labels.max() + 1
    joint = np.bincount(ids * k + labels, minlength=(ids.max() + 1) * k).reshape(-1, k)
    return float(joint.max(1).sum() / len(ids))


def patch_colours(images: Tensor, grid: tuple[int, int], levels: int = COLOUR_LEVELS) -> Tensor:
    """(N, 3, H, W) RGB 0..255 -> (N, h, w) colour bin of each patch's mean RGB (``levels`` per channel)."""
    mean = torch.nn.functional.adaptive_avg_pool2d(images.float(), grid)  # (N, 3, h, w); H, W multiples of h, w
    q = (mean / 256 * levels).long().clamp(0, levels - 1)
    return (q[:, 0] * levels + q[:, 1]) * levels + q[:, 2]


def token_group_stats(ids: Tensor, labels: Tensor, images: Tensor, num_classes: int, seed: int = 0) -> dict:
    """How the token ids of a labeled split group its patches.

    Args:
        ids: (N, h*w) token ids, row-major.
        labels: (N, H, W) label maps (0..K-1, 255 ignored) of the same images.
        images: (N, 3, H, W) RGB 0..255, the images the ids were computed from (any size the grid divides).
        num_classes: K.
    Returns:
        ``codes_used``, ``nmi_class`` / ``nmi_class_shuffled``, ``nmi_colour`` / ``nmi_colour_shuffled``,
        ``nmi_position`` / ``nmi_position_shuffled``, ``purity`` / ``purity_majority`` (percent), ``num_patches``
        (patches with a label).
    """
    n = ids.shape[0]
    h = w = int(round(ids.shape[1] ** 0.5))
    if h * w != ids.shape[1]:
        raise ValueError(f'{ids.shape[1]} ids per image is not a square grid')
    cls = patch_labels(labels, (h, w), num_classes).reshape(-1).numpy()
    colour = patch_colours(images, (h, w)).reshape(-1).numpy()
    code = ids.reshape(-1).cpu().numpy()
    position = np.tile(np.arange(h * w), n)
    keep = cls != IGNORE_INDEX
    code, cls, colour, position = code[keep], cls[keep], colour[keep], position[keep]
    shuffled = np.random.default_rng(seed).permutation(code)
    counts = np.bincount(cls, minlength=num_classes)
    return dict(codes_used=int(len(np.unique(code))), num_patches=int(keep.sum()), num_images=n,
                nmi_class=nmi(code, cls), nmi_class_shuffled=nmi(shuffled, cls),
                nmi_colour=nmi(code, colour), nmi_colour_shuffled=nmi(shuffled, colour),
                nmi_position=nmi(code, position), nmi_position_shuffled=nmi(shuffled, position),
                purity=100 * purity(code, cls), purity_majority=100 * counts.max() / counts.sum())
