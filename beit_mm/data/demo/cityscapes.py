"""A small synthetic set in the Cityscapes layout that mmseg's ``CityscapesDataset`` reads::

    root/leftImg8bit/{train,val}/<city>/<city>_<6-digit seq>_000019_leftImg8bit.png      RGB, size x 2 size
    root/gtFine/{train,val}/<city>/<same stem>_gtFine_labelTrainIds.png                  train ids 0..18, 255 ignored
"""
from __future__ import annotations

import os.path as osp

from .seg_layout import SegDemoLayout, demo_classes, write_seg_demo

# demo class -> the Cityscapes train id it is drawn as
CITYSCAPES_TRAIN_ID = {'road': 0, 'wall': 3, 'tree': 8, 'grass': 9, 'sky': 10, 'car': 13}
CITYSCAPES_NAMES = {'tree': 'vegetation', 'grass': 'terrain'}  # the Cityscapes name where it is not the demo's
IGNORE_INDEX = 255
CITIES = {'train': ('aachen', 'bochum', 'bremen'), 'val': ('frankfurt', 'lindau', 'munster')}
FRAME = 19  # the annotated frame of every gtFine sequence snippet


def cityscapes_layout(num_train: int, num_val: int) -> SegDemoLayout:
    pairs = {}
    for split, count in (('train', num_train), ('val', num_val)):
        cities = CITIES[split]
        pairs[split] = []
        for i in range(count):
            city = cities[i % len(cities)]
            stem = f'{city}_{i // len(cities):06d}_{FRAME:06d}'
            pairs[split].append((osp.join('leftImg8bit', split, city, stem + '_leftImg8bit.png'),
                                 osp.join('gtFine', split, city, stem + '_gtFine_labelTrainIds.png')))
    return SegDemoLayout(pairs)


def make_demo_cityscapes(root: str, num_train: int = 200, num_val: int = 40, size: int = 128, seed: int = 0) -> str:
    """Write the Cityscapes demo under ``root`` (images ``size`` x ``2 * size``); returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    return write_seg_demo(root, 'beit_mm.data.demo_cityscapes.make_demo_cityscapes',
                          dict(num_train=num_train, num_val=num_val, size=size, seed=seed),
                          cityscapes_layout(num_train, num_val), demo_classes(CITYSCAPES_TRAIN_ID),
                          void=IGNORE_INDEX, size=size, seed=seed, width_factor=2)

