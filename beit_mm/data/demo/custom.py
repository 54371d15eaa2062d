"""A small synthetic set in the custom layout of ``CustomSegDataset``::

    root/classes.txt                       sky, grass, car (mask values 0, 1, 2)
    root/palette.txt                       their demo colours, "R G B" per line
    root/images/{train,val}/<stem>.jpg     RGB, size x size; about a third of them .png
    root/masks/{train,val}/<stem>.png      uint8 class indices 0..2, 255 (ignored) on the random-colour regions

The stems are random hex strings, as in a set exported from a labelling tool.
"""
from __future__ import annotations

import os
import os.path as osp

import numpy as np
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root, write_demo_file
from ...fileio.inputs import open_image
from ..datasets.custom import CLASSES_FILE, PALETTE_FILE
from .ade20k import DEMO_CLASSES, make_classes_sample

# mask value -> the ADE20K demo class drawn for it (its name, colour and texture): sky, grass, car
CUSTOM_DEMO_CLASSES = {value: DEMO_CLASSES[ade_id] for value, ade_id in enumerate((3, 10, 21))}
IGNORE_INDEX = 255  # mmseg's ignored label: the demo's void regions
SPLITS = ('train', 'val')
PNG_SHARE = 1 / 3  # images stored as .png (the rest .jpg): the dataset lists both


def custom_demo_files(num_train: int, num_val: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """``{split: [(image path, mask path), ...]}`` relative to the root, random stems drawn from ``seed`` alone."""
    rng = np.random.default_rng([seed, 1])
    used: set[str] = set()
    layout = {}
    for split, count in zip(SPLITS, (num_train, num_val)):
        pairs = []
        while len(pairs) < count:
            stem = rng.bytes(6).hex()
            suffix = '.png' if rng.random() < PNG_SHARE else '.jpg'
            if stem in used:
                continue
            used.add(stem)
            pairs.append((osp.join('images', split, stem + suffix), osp.join('masks', split, stem + '.png')))
        layout[split] = pairs
    return layout


def _write_text(path: str, text: str) -> None:
    """Write ``text`` at ``path`` in a claimed demo root."""
    write_demo_file(path, text)


def make_demo_custom(root: str, num_train: int = 200, num_val: int = 40, size: int = 128, seed: int = 0) -> str:
    """Write the custom-layout demo set under ``root``; a second call with the same arguments rewrites nothing.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    layout = custom_demo_files(num_train, num_val, seed)
    expected = [CLASSES_FILE, PALETTE_FILE] + [path for pairs in layout.values() for pair in pairs for path in pair]
    arguments = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)
    tree = open_demo_root(root, 'beit_mm.data.demo_custom.make_demo_custom', arguments, expected)
    if tree.mode == KEEP or (tree.mode == UPDATE and tree.complete(expected)):
        return root
    names = [CUSTOM_DEMO_CLASSES[v][0] for v in sorted(CUSTOM_DEMO_CLASSES)]
    tree.write_text(CLASSES_FILE, ''.join(f'{name}\n' for name in names))
    colours = [CUSTOM_DEMO_CLASSES[v][1] for v in sorted(CUSTOM_DEMO_CLASSES)]
    tree.write_text(PALETTE_FILE, ''.join(f'{r} {g} {b}\n' for r, g, b in colours))
    tree.remove_stale(expected)
    rng = np.random.default_rng(seed)
    for split in SPLITS:
        split_rng = np.random.default_rng(rng.integers(2**32))
        for img_path, mask_path in layout[split]:
            image, label_map = make_classes_sample(size, split_rng, CUSTOM_DEMO_CLASSES, void=IGNORE_INDEX)
            extra = dict(quality=92) if img_path.endswith('.jpg') else {}
            tree.save_image(img_path, Image.fromarray(image), **extra)
            tree.save_image(mask_path, Image.fromarray(label_map, mode='L'))
    tree.finish()
    return root


def label_share(root: str) -> dict[int, float]:
    """The share of pixels of every mask value over both splits of a custom-layout root, ``{value: share}``."""
    counts: dict[int, int] = {}
    for split in SPLITS:
        folder = osp.join(root, 'masks', split)
        for name in sorted(os.listdir(folder)) if osp.isdir(folder) else []:
            with open_image(osp.join(folder, name)) as mask:
                values, n = np.unique(np.asarray(mask), return_counts=True)
            for value, count in zip(values.tolist(), n.tolist()):
                counts[value] = counts.get(value, 0) + count
    total = sum(counts.values()) or 1
    return {value: count / total for value, count in sorted(counts.items())}
