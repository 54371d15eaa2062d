"""Small synthetic sets in the two COCO-Stuff layouts that mmseg's ``COCOStuffDataset`` reads::

    164k: root/images/{train2017,val2017}/<id>.jpg, root/annotations/<split>/<id>_labelTrainIds.png (0..170, 255)
    10k:  root/images/{train2014,test2014}/COCO_train2014_<id>.jpg, the same annotations (0 unlabeled, 1..171)
"""
from __future__ import annotations

import os.path as osp

import numpy as np

from .seg_layout import SegDemoLayout, demo_classes, write_seg_demo

# demo class -> its index in COCOStuffDataset.METAINFO['classes']; the 10k maps store index + 1
COCO_STUFF_INDEX = {'sky': 145, 'grass': 112, 'car': 2, 'road': 137, 'tree': 157, 'wall': 161, 'water': 166,
                    'floor': 103}  # sky-other, grass, car, road, tree, wall-other, water-other, floor-other
COCO_STUFF_NAMES = {'sky': 'sky-other', 'wall': 'wall-other', 'water': 'water-other', 'floor': 'floor-other'}
IGNORE_INDEX = 255
COCO_ID_RANGE = 581929  # the largest COCO 2017 image id
SPLITS_164K = ('train2017', 'val2017')
SPLITS_10K = ('train2014', 'test2014')


def _ids(count: int, seed: int) -> list[int]:
    rng = np.random.default_rng([seed, 1])
    return [int(i) + 1 for i in rng.choice(COCO_ID_RANGE, count, replace=False)]


def _coco_stuff_layout(splits: tuple[str, str], stem: str, num_train: int, num_val: int, seed: int) -> SegDemoLayout:
    """Image and ``_labelTrainIds.png`` pairs, ``stem`` formatted with distinct random COCO image ids."""
    ids = iter(_ids(num_train + num_val, seed))
    pairs = {}
    for split, count in zip(splits, (num_train, num_val)):
        stems = [stem.format(next(ids)) for _ in range(count)]
        pairs[split] = [(osp.join('images', split, s + '.jpg'),
                         osp.join('annotations', split, s + '_labelTrainIds.png')) for s in stems]
    return SegDemoLayout(pairs)


def coco_stuff164k_layout(num_train: int, num_val: int, seed: int) -> SegDemoLayout:
    return _coco_stuff_layout(SPLITS_164K, '{:012d}', num_train, num_val, seed)


def coco_stuff10k_layout(num_train: int, num_val: int, seed: int) -> SegDemoLayout:
    return _coco_stuff_layout(SPLITS_10K, 'COCO_train2014_{:012d}', num_train, num_val, seed)


def make_demo_coco_stuff164k(root: str, num_train: int = 200, num_val: int = 40, size: int = 128,
                             seed: int = 0) -> str:
    """Write the COCO-Stuff-164k demo under ``root``; returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    return write_seg_demo(root, 'beit_mm.data.demo_coco_stuff.make_demo_coco_stuff164k',
                          dict(num_train=num_train, num_val=num_val, size=size, seed=seed),
                          coco_stuff164k_layout(num_train, num_val, seed), demo_classes(COCO_STUFF_INDEX),
                          void=IGNORE_INDEX, size=size, seed=seed)


def make_demo_coco_stuff10k(root: str, num_train: int = 200, num_val: int = 40, size: int = 128,
                            seed: int = 0) -> str:
    """Write the COCO-Stuff-10k demo under ``root``; returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    stored = {name: index + 1 for name, index in COCO_STUFF_INDEX.items()}
    return write_seg_demo(root, 'beit_mm.data.demo_coco_stuff.make_demo_coco_stuff10k',
                          dict(num_train=num_train, num_val=num_val, size=size, seed=seed),
                          coco_stuff10k_layout(num_train, num_val, seed), demo_classes(stored), void=0, size=size,
                          seed=seed)

