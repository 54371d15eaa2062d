"""A small synthetic set in the Pascal Context layout that mmseg's ``PascalContextDataset59`` reads (root = VOC2010)::

    root/JPEGImages/<year>_<6 digits>.jpg               every image, and a few that no split lists (as VOC2010's)
    root/SegmentationClassContext/<stem>.png            0 = background, the 59 classes as 1..59
    root/ImageSets/SegmentationContext/{train,val}.txt  the split's stems, one a line, sorted
"""
from __future__ import annotations

import os.path as osp

import numpy as np

from .seg_layout import SegDemoLayout, demo_classes, write_seg_demo

# demo class -> its index in PascalContextDataset59.METAINFO['classes']; the maps store index + 1
PASCAL_CONTEXT_59_INDEX = {'sky': 46, 'grass': 28, 'car': 13, 'road': 40, 'tree': 52, 'wall': 55, 'water': 56,
                           'floor': 25}
BACKGROUND = 0
SPLITS = ('train', 'val')
UNLISTED_SHARE = 0.1  # images in JPEGImages that no split lists, per listed image (at least one)
YEARS = (2008, 2009, 2010)


def pascal_context_layout(num_train: int, num_val: int, seed: int) -> SegDemoLayout:
    rng = np.random.default_rng([seed, 1])
    num_unlisted = max(1, round(UNLISTED_SHARE * (num_train + num_val)))
    stems: list[str] = []
    while len(stems) < num_train + num_val + num_unlisted:
        stem = f'{rng.choice(YEARS)}_{rng.integers(1, 10000):06d}'
        if stem not in stems:
            stems.append(stem)
    pairs, texts, start = {}, {}, 0
    for split, count in zip(SPLITS, (num_train, num_val)):
        chosen = stems[start:start + count]
        start += count
        pairs[split] = [(osp.join('JPEGImages', s + '.jpg'), osp.join('SegmentationClassContext', s + '.png'))
                        for s in chosen]
        texts[osp.join('ImageSets', 'SegmentationContext', f'{split}.txt')] = ''.join(f'{s}\n' for s in sorted(chosen))
    unlisted = [osp.join('JPEGImages', s + '.jpg') for s in stems[start:]]
    return SegDemoLayout(pairs, texts, unlisted)


def make_demo_pascal_context(root: str, num_train: int = 200, num_val: int = 40, size: int = 128,
                             seed: int = 0) -> str:
    """Write the Pascal Context demo under ``root`` (the ``VOC2010`` folder); returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    stored = {name: index + 1 for name, index in PASCAL_CONTEXT_59_INDEX.items()}
    return write_seg_demo(root, 'beit_mm.data.demo_pascal_context.make_demo_pascal_context',
                          dict(num_train=num_train, num_val=num_val, size=size, seed=seed),
                          pascal_context_layout(num_train, num_val, seed), demo_classes(stored), void=BACKGROUND,
                          size=size, seed=seed)

