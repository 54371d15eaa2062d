"""Matplotlib figures of attention maps, rollout, token maps and MIM reconstructions, each an (H, W, 3) uint8
image for a PNG file (:func:`save_png`), a visualizer or TensorBoard."""
from __future__ import annotations

import colorsys

import numpy as np
import torch
from torch import Tensor

from .attention import AttentionMap, query_attention
from .mim import MIMPictures
from .rollout import rollout_of_maps


def _plt():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def to_uint8(image: Tensor) -> np.ndarray:
    """(3, H, W) float in [0, 1] -> (H, W, 3) uint8."""
    return (image.detach().float().clamp(0, 1).permute(1, 2, 0).cpu().numpy() * 255).round().astype(np.uint8)


def token_palette(vocab_size: int) -> np.ndarray:
    """(vocab_size, 3) float colours: hues spaced by the golden ratio so neighbouring ids look different."""
    hues = (np.arange(vocab_size) * 0.6180339887) % 1.0
    sat = 0.55 + 0.45 * ((np.arange(vocab_size) * 7) % 3) / 2
    val = 0.65 + 0.35 * ((np.arange(vocab_size) * 5) % 2)
    return np.array([colorsys.hsv_to_rgb(h, s, v) for h, s, v in zip(hues, sat, val)])


def _figure_to_array(fig) -> np.ndarray:
    fig.canvas.draw()
    array = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    _plt().close(fig)
    return array


def _upsample(heat: Tensor, size: tuple[int, int]) -> np.ndarray:
    """(h, w) map -> (H, W) by nearest neighbour (patches stay visible as blocks)."""
    return torch.nn.functional.interpolate(heat[None, None].float(), size=size, mode='nearest')[0, 0].cpu().numpy()


def _mark_patch(ax, query: tuple[int, int], grid: tuple[int, int], size: tuple[int, int], color: str = 'red') -> None:
    from matplotlib.patches import Rectangle
    ph, pw = size[0] / grid[0], size[1] / grid[1]
    ax.add_patch(Rectangle((query[1] * pw - 0.5, query[0] * ph - 0.5), pw, ph, fill=False, edgecolor=color, lw=2))


def _off(ax) -> None:
    ax.set_xticks([])
    ax.set_yticks([])


def attention_figure(image: np.ndarray, maps: list[AttentionMap], block: int, query: tuple[int, int],
                     title: str = '') -> np.ndarray:
    """Row 1: the image with the query patch, then each head's attention of that query at ``maps[block]``.
    Row 2: rollout (over the blocks sharing the last block's grid) from the cls token (if any) and from the query.

    Args:
        image: (H, W, 3) uint8, the model's input.
        maps: recorded blocks (:func:`beit_mm.visualization.attention.record_attention`).
        block: index into ``maps`` (negative counts from the end).
        query: (row, col) of the query patch on ``maps[block].query_grid``.
    """
    plt = _plt()
    amap = maps[block]
    heads = query_attention(amap, query)  # (heads, Hk, Wk)
    rollout, last = rollout_of_maps(maps)
    size = image.shape[:2]
    n_heads = heads.shape[0]
    cols = max(n_heads + 1, 3)
    fig, axes = plt.subplots(2, cols, figsize=(1.7 * cols, 3.7), squeeze=False)
    axes[0, 0].imshow(image)
    _mark_patch(axes[0, 0], query, amap.query_grid, size)
    axes[0, 0].set_title('query patch', fontsize=8)
    for h in range(n_heads):
        ax = axes[0, h + 1]
        ax.imshow(image)
        ax.imshow(_upsample(heads[h], size), cmap='inferno', alpha=0.65)
        _mark_patch(ax, query, amap.query_grid, size, color='cyan')
        ax.set_title(f'{amap.name}\nhead {h}', fontsize=7)
    # rollout rows: cls token and the query (mapped onto the last block's grid)
    hq, wq = last.query_grid
    qr = min(query[0] * hq // amap.query_grid[0], hq - 1)
    qc = min(query[1] * wq // amap.query_grid[1], wq - 1)
    rows = []
    if last.num_cls:
        rows.append(('rollout: cls token', rollout[0, 0, last.num_cls:]))
    rows.append((f'rollout: patch ({qr}, {qc})', rollout[0, last.num_cls + qr * wq + qc, last.num_cls:]))
    for i, (name, row) in enumerate(rows):
        ax = axes[1, i]
        ax.imshow(image)
        ax.imshow(_upsample(row.reshape(hq, wq), size), cmap='inferno', alpha=0.65)
        if 'patch' in name:
            _mark_patch(ax, (qr, qc), (hq, wq), size, color='cyan')
        ax.set_title(name, fontsize=8)
    for ax in axes.flat:
        _off(ax)
    for ax in axes[1, len(rows):]:
        ax.axis('off')
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _figure_to_array(fig)


def token_map_figure(image: np.ndarray, ids: Tensor, grid: tuple[int, int], vocab_size: int,
                     reconstruction: np.ndarray | None = None, title: str = '') -> np.ndarray:
    """The image, its token ids as colours (one colour per id, ids printed), and the decoded tokens if given.

    Args:
        image: (H, W, 3) uint8, the tokenizer's view.
        ids: (h*w,) token ids.
        grid: (h, w).
        vocab_size: size of the vocabulary (fixes the palette).
        reconstruction: (H, W, 3) uint8 decoded tokens, optional.
    """
    plt = _plt()
    n = 3 if reconstruction is not None else 2
    fig, axes = plt.subplots(1, n, figsize=(2.4 * n, 2.6))
    axes[0].imshow(image)
    axes[0].set_title('image (tokenizer view)', fontsize=8)
    ids2d = ids.view(*grid).cpu().numpy()
    axes[1].imshow(token_palette(vocab_size)[ids2d])
    if grid[0] * grid[1] <= 100:
        for r in range(grid[0]):
            for c in range(grid[1]):
                axes[1].text(c, r, str(ids2d[r, c]), ha='center', va='center', fontsize=6, color='black')
    axes[1].set_title(f'token ids ({len(np.unique(ids2d))} distinct of {vocab_size})', fontsize=8)
    if reconstruction is not None:
        axes[2].imshow(reconstruction)
        axes[2].set_title('decoded tokens', fontsize=8)
    for ax in axes:
        _off(ax)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _figure_to_array(fig)


def token_maps_figure(images: np.ndarray, labels: np.ndarray, maps: dict[str, tuple[Tensor, int]],
                      num_classes: int, title: str = '') -> np.ndarray:
    """One row per image: the image, its label map, then each tokenizer's token ids as colours (one colour per id;
    a region of one colour is one code), so what the codes group can be compared with what the classes are.

    Args:
        images: (N, H, W, 3) uint8.
        labels: (N, H, W) int class ids (0..K-1, >= K ignored, drawn black).
        maps: name -> ((N, h*w) token ids, vocabulary size), e.g. ``{'dVAE': ..., 'VQ-KD': ...}``.
        num_classes: K (fixes the label palette).
    """
    plt = _plt()
    n, cols = images.shape[0], 2 + len(maps)
    fig, axes = plt.subplots(n, cols, figsize=(1.9 * cols, 1.9 * n + 0.5), squeeze=False)
    label_colours = np.concatenate([token_palette(num_classes), np.zeros((1, 3))])
    for r in range(n):
        axes[r, 0].imshow(images[r])
        axes[r, 1].imshow(label_colours[np.minimum(labels[r], num_classes)])
        for c, (name, (ids, vocab)) in enumerate(maps.items(), start=2):
            side = int(round(ids.shape[1] ** 0.5))
            grid = ids[r].view(side, side).cpu().numpy()
            axes[r, c].imshow(token_palette(vocab)[grid])
            if r == 0:
                axes[r, c].set_title(f'{name} token ids', fontsize=8)
        if r == 0:
            axes[r, 0].set_title('image', fontsize=8)
            axes[r, 1].set_title('classes (labels)', fontsize=8)
        for ax in axes[r]:
            _off(ax)
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return _figure_to_array(fig)


def mim_figure(image: np.ndarray, tokenizer_image: np.ndarray, pics: MIMPictures, sample: int = 0,
               title: str = '') -> np.ndarray:
    """Image | blockwise mask over the image | tokenizer reconstruction | prediction decoded (masked patches
    predicted, the rest the tokenizer's) with the masked region outlined.

    Args:
        image: (H, W, 3) uint8 backbone view.
        tokenizer_image: (H', W', 3) uint8 tokenizer view.
        pics: :func:`beit_mm.visualization.mim.mim_pictures` output.
    """
    plt = _plt()
    mask = pics.mask[sample].float()
    size = image.shape[:2]
    masked = image.copy()
    m = _upsample(mask, size) > 0.5
    masked[m] = (0.35 * masked[m] + 0.65 * np.array([40, 40, 40])).astype(np.uint8)
    recon, pred = to_uint8(pics.reconstruction[sample]), to_uint8(pics.prediction[sample])
    fig, axes = plt.subplots(1, 5, figsize=(11, 2.7))
    panels = [(image, 'image'), (masked, f'blockwise mask ({int(mask.sum())}/{mask.numel()} patches)'),
              (tokenizer_image, 'tokenizer view'), (recon, 'tokenizer reconstruction'),
              (pred, f'MIM prediction (acc {pics.accuracy:.2f})')]
    for ax, (img, name) in zip(axes, panels):
        ax.imshow(img)
        ax.set_title(name, fontsize=8)
        _off(ax)
    # outline the masked patches on the prediction
    mh = _upsample(mask, pred.shape[:2])
    axes[4].contour(mh, levels=[0.5], colors='cyan', linewidths=1.0)
    axes[1].contour(m.astype(float), levels=[0.5], colors='cyan', linewidths=1.0)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _figure_to_array(fig)


def save_png(array: np.ndarray, path: str) -> str:
    """Write an (H, W, 3) uint8 image as an optimized PNG atomically; returns the path. The caller checks the
    destination first (:func:`beit_mm.fileio.outputs.check_output`)."""
    from PIL import Image

    from ..fileio.outputs import atomic_file
    with atomic_file(path) as tmp:
        Image.fromarray(array).save(tmp, format='PNG', optimize=True)
    return path
