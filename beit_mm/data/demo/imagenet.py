"""A small synthetic classification dataset in ImageNet's folder layout::

    root/train/<wnid>/<wnid>_<i>.JPEG
    root/val/<wnid>/ILSVRC2012_val_<n>.JPEG
    root/meta/{train,val}.txt                     with ann_files=True: lines "<wnid>/<file> <label>"

The wnids increase with the class index, so sorted folder names give ImageNet's label order. Each class is one
coloured, textured shape on a noisy background: a tiny CvT learns the 5 default classes in minutes on a CPU.
"""
import colorsys
import os.path as osp
from typing import List, Tuple

import numpy as np
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root, write_demo_file

SHAPES: Tuple[str, ...] = ('disc', 'square', 'triangle', 'ring', 'cross', 'diamond')
TEXTURES: Tuple[str, ...] = ('flat', 'hstripes', 'checker', 'dots')
_FIRST_WNID = 1440764  # n01440764, the first ImageNet-1k class (tench)
_WNID_STEP = 9973
_SPLITS = ('train', 'val')


def demo_wnids(num_classes: int) -> List[str]:
    """The folder names of the demo classes, in class-index order."""
    return [f'n{_FIRST_WNID + _WNID_STEP * k:08d}' for k in range(num_classes)]


def demo_class_style(index: int, num_classes: int) -> Tuple[str, str, Tuple[int, int, int]]:
    """(shape, texture, RGB colour) of class ``index``: shape cycles fastest, hues spread over the colour wheel."""
    shape = SHAPES[index % len(SHAPES)]
    texture = TEXTURES[(index // len(SHAPES)) % len(TEXTURES)] if num_classes > len(SHAPES) else TEXTURES[
        index % len(TEXTURES)]
    hue = (index / max(num_classes, 1) + 0.61803398875 * (index // 12)) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.95)
    return shape, texture, (int(255 * r), int(255 * g), int(255 * b))


def _shape_mask(shape: str, size: int, rng: np.random.Generator) -> np.ndarray:
    radius = rng.uniform(0.2, 0.4) * size
    cy, cx = rng.uniform(radius, size - radius, 2)
    return shape_mask(shape, size, cy, cx, radius)


def shape_mask(shape: str, size: int, cy: float, cx: float, radius: float) -> np.ndarray:
    """A boolean (size, size) mask of ``shape`` centred at (cy, cx), ``radius`` wide."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    dy, dx = (yy - cy) / radius, (xx - cx) / radius
    if shape == 'disc':
        return dy**2 + dx**2 <= 1.0
    if shape == 'square':
        return (np.abs(dy) <= 0.8) & (np.abs(dx) <= 0.8)
    if shape == 'triangle':
        return (dy <= 0.8) & (dy >= -0.9 + 1.7 * np.abs(dx))
    if shape == 'ring':
        d2 = dy**2 + dx**2
        return (d2 <= 1.0) & (d2 >= 0.36)
    if shape == 'cross':
        return ((np.abs(dy) <= 0.3) & (np.abs(dx) <= 1.0)) | ((np.abs(dx) <= 0.3) & (np.abs(dy) <= 1.0))
    if shape == 'diamond':
        return np.abs(dy) + np.abs(dx) <= 1.0
    raise ValueError(f'unknown shape {shape!r}; use one of {SHAPES}')


def texture(kind: str, size: int) -> np.ndarray:
    """An intensity modulation in [-1, 1], shape (size, size)."""
    yy, xx = np.mgrid[0:size, 0:size]
    if kind == 'flat':
        return np.zeros((size, size), np.float32)
    if kind == 'hstripes':
        return np.where((yy // 3) % 2 == 0, 1.0, -1.0).astype(np.float32)
    if kind == 'checker':
        return np.where(((yy // 4) + (xx // 4)) % 2 == 0, 1.0, -1.0).astype(np.float32)
    if kind == 'dots':
        return np.where((yy % 4 < 2) & (xx % 4 < 2), 1.0, -0.3).astype(np.float32)
    raise ValueError(f'unknown texture {kind!r}; use one of {TEXTURES}')


def make_demo_image(index: int, num_classes: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """One RGB uint8 image (size, size, 3) of class ``index``."""
    shape, texture_kind, colour = demo_class_style(index, num_classes)
    grey = rng.uniform(40, 200)
    image = np.full((size, size, 3), grey, np.float32) + rng.normal(0.0, 12.0, (size, size, 3))
    mask = _shape_mask(shape, size, rng)
    fg = np.asarray(colour, np.float32) * rng.uniform(0.85, 1.1) + 40.0 * texture(texture_kind, size)[..., None]
    image[mask] = fg[mask] + rng.normal(0.0, 6.0, (int(mask.sum()), 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def _split_files(split: str, wnids: List[str], per_class: int) -> List[List[str]]:
    if split == 'train':
        return [[f'{w}/{w}_{i}.JPEG' for i in range(per_class)] for w in wnids]
    return [[f'{w}/ILSVRC2012_val_{k * per_class + i + 1:08d}.JPEG' for i in range(per_class)]
            for k, w in enumerate(wnids)]


def demo_imagenet_files(wnids: List[str], per_class_train: int, per_class_val: int, ann_files: bool) -> List[str]:
    """Relative paths of the files :func:`make_demo_imagenet` writes."""
    files = [osp.join(split, name) for split, per_class in zip(_SPLITS, (per_class_train, per_class_val))
             for class_files in _split_files(split, wnids, per_class) for name in class_files]
    return files + ([osp.join('meta', f'{split}.txt') for split in _SPLITS] if ann_files else [])


def _write_text_if_changed(path: str, text: str) -> None:
    """Write ``text`` at ``path`` in a claimed demo root unless it holds it already."""
    write_demo_file(path, text)


def make_demo_imagenet(root: str,
                       num_classes: int = 5,
                       per_class_train: int = 40,
                       per_class_val: int = 10,
                       size: int = 64,
                       seed: int = 0,
                       ann_files: bool = False) -> str:
    """Write the demo classification set under ``root``; skip complete splits.

    Args:
        root: dataset root: new, empty, or one this function wrote.
        num_classes: number of classes (wnid folders).
        per_class_train, per_class_val: images per class and split.
        size: image side in pixels.
        seed: the same arguments give the same files.
        ann_files: also write ``meta/train.txt`` and ``meta/val.txt``.

    Returns:
        ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    if num_classes < 1 or per_class_train < 1 or per_class_val < 1 or size < 16:
        raise ValueError(f'make_demo_imagenet needs num_classes, per_class_train, per_class_val >= 1 and size >= 16; '
                         f'got {num_classes}, {per_class_train}, {per_class_val}, {size}')
    wnids = demo_wnids(num_classes)
    arguments = dict(num_classes=num_classes, per_class_train=per_class_train, per_class_val=per_class_val, size=size,
                     seed=seed, ann_files=ann_files)
    expected = demo_imagenet_files(wnids, per_class_train, per_class_val, ann_files)
    tree = open_demo_root(root, 'beit_mm.data.demo_imagenet.make_demo_imagenet', arguments, expected)
    if tree.mode == KEEP:
        return root
    # stale files first: a stale class folder would shift the labels
    tree.remove_stale(expected)
    rng = np.random.default_rng(seed)
    for split, per_class in zip(_SPLITS, (per_class_train, per_class_val)):
        split_rng = np.random.default_rng(rng.integers(2**32))
        files = _split_files(split, wnids, per_class)
        if tree.mode != UPDATE or not tree.complete(f'{split}/{name}' for class_files in files for name in class_files):
            for index, class_files in enumerate(files):
                for name in class_files:
                    image = make_demo_image(index, num_classes, size, split_rng)
                    tree.save_image(f'{split}/{name}', Image.fromarray(image), quality=90)
        if ann_files:
            tree.write_text(f'meta/{split}.txt', ''.join(f'{name} {index}\n' for index, class_files in enumerate(files)
                                                        for name in class_files))
    tree.finish()
    return root
