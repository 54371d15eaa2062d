"""Held-out statistics of a tokenizer's hard codes and reconstructions (``beit_mm.DVAE``, ``beit_mm.VQKD``).

``usage`` is the fraction of codes chosen at least once, ``perplexity`` ``exp(entropy)`` of the code histogram,
``psnr`` that of the hard-code reconstruction, ``psnr_mean_colour`` that of a mean-colour image (the baseline),
``dead_codes`` the codes chosen nowhere and ``teacher_cosine`` the mean cosine of decoded to teacher features.
"""
from __future__ import annotations

import glob
import math
import os.path as osp

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from ...fileio.inputs import open_image

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp')


def load_images(folder: str, size: int, limit: int) -> Tensor:
    """The first ``limit`` images under ``folder`` (sorted, recursive), resized: (N, 3, size, size) in [0, 1]."""
    files = sorted(f for f in glob.glob(osp.join(folder, '**', '*'), recursive=True)
                   if f.lower().endswith(IMAGE_SUFFIXES))[:limit]
    if not files:
        raise FileNotFoundError(f'no images ({", ".join(IMAGE_SUFFIXES)}) under {folder}; point the held-out folder '
                                'to images the tokenizer was not trained on (e.g. an ADE20K-layout images/validation)')
    arrays = [np.asarray(open_image(f).convert('RGB').resize((size, size), Image.LANCZOS)) for f in files]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float() / 255


def code_statistics(ids: Tensor, vocab_size: int) -> dict[str, float]:
    """``usage`` and ``perplexity`` (module docstring) of int code ids of any shape."""
    counts = torch.bincount(ids.flatten(), minlength=vocab_size).double()
    p = counts[counts > 0] / counts.sum()
    return dict(usage=(counts > 0).double().mean().item(), perplexity=math.exp(-(p * p.log()).sum().item()))


def psnr(x: Tensor, y: Tensor) -> float:
    return 10 * math.log10(1 / max(F.mse_loss(x.double(), y.double()).item(), 1e-12))


@torch.no_grad()
def evaluate_tokenizer(model, images: Tensor, batch_size: int = 64) -> tuple[dict[str, float], Tensor]:
    """Held-out statistics of a ``beit_mm.DVAE`` on [0, 1] images (N, 3, H, W).

    Returns:
        (``dict(usage, perplexity, perplexity_fraction, psnr, psnr_mean_colour)``, reconstructions (N, 3, H, W)).
    """
    was_training = model.training
    model.eval()
    ids, recs = [], []
    for chunk in images.split(batch_size):
        code = model.encode(chunk).argmax(dim=1)  # (b, h, w)
        ids.append(code)
        recs.append(model.decode(F.one_hot(code, model.vocab_size).permute(0, 3, 1, 2).float()))
    model.train(was_training)
    recs = torch.cat(recs)
    stats = code_statistics(torch.cat(ids), model.vocab_size)
    stats['perplexity_fraction'] = stats['perplexity'] / model.vocab_size
    stats['psnr'] = psnr(recs, images)
    stats['psnr_mean_colour'] = psnr(images.mean(dim=(2, 3), keepdim=True).expand_as(images), images)
    return stats, recs


def reconstruction_grid(images: Tensor, recs: Tensor, columns: int = 8) -> np.ndarray:
    """uint8 (H', W', 3) grid: rows of ``columns`` images, each followed by its reconstructions."""
    if images.shape[0] == 0:
        raise ValueError('no images to show')
    columns = min(columns, images.shape[0])
    n = (images.shape[0] // columns) * columns
    rows = []
    for start in range(0, n, columns):
        for batch in (images, recs):
            rows.append(torch.cat(list(batch[start:start + columns]), dim=2))  # (3, H, columns * W)
    grid = torch.cat(rows, dim=1).clamp(0, 1)
    return (grid.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)


@torch.no_grad()
def evaluate_vqkd(model, images: Tensor, batch_size: int = 64) -> dict[str, float]:
    """Held-out statistics of a ``beit_mm.VQKD`` on [0, 1] RGB images (N, 3, H, W).

    Returns:
        ``dict(usage, perplexity, perplexity_fraction, dead_codes, teacher_cosine)``; ``teacher_cosine`` only with a
        teacher and a decoder.
    """
    ids, cosines = [], []
    grid = (images.shape[2] // model.patch_size, images.shape[3] // model.patch_size)
    was_training = model.training
    model.eval()
    for chunk in images.split(batch_size):
        pixels = chunk * 255  # VQKD and its teacher take RGB 0..255
        code_ids = model.get_token_ids(pixels)
        ids.append(code_ids)
        if model.teacher is not None and model.with_decoder:
            rec = model.decode(model.quantize.embedding(code_ids), grid)
            cosines.append(F.cosine_similarity(rec, model.teacher_features(pixels).float(), dim=-1).flatten())
    model.train(was_training)
    stats = code_statistics(torch.cat(ids), model.num_codes)
    stats['perplexity_fraction'] = stats['perplexity'] / model.num_codes
    stats['dead_codes'] = round((1 - stats['usage']) * model.num_codes)
    if cosines:
        stats['teacher_cosine'] = torch.cat(cosines).mean().item()
    return stats
