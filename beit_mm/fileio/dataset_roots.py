"""What counts as a dataset root, so that no output ever lands inside one (:func:`beit_mm.fileio.outputs.check_output`).

A tool passes the data roots it reads as inputs; this rule is the backstop for the datasets it does not name (another
config's data, a root given by a path through a link). A folder is a dataset root when it is laid out as mmseg's
datasets are, or carries the marker of a beit_mm demo generator:

- it holds both folders of one of :data:`DATASET_LAYOUTS`: ``images/`` and ``annotations/`` (ADE20K's
  ``ADEChallengeData2016``, COCO-Stuff 164k/10k and the demo sets), ``images/`` and ``masks/`` (the custom layout of
  ``beit_mm.CustomSegDataset``), ``leftImg8bit/`` and ``gtFine/`` (Cityscapes), ``JPEGImages/`` and
  ``SegmentationClassContext/`` or ``SegmentationClass/`` (Pascal Context, VOC), ``train2017/`` or ``val2017/`` and
  ``annotations/`` (COCO panoptic and instance), ``train/`` and ``meta/`` (ImageNet as mmpretrain reads it);
- it holds :data:`DEMO_MARKER` (``.beit_mm_demo.json``, written first by :mod:`beit_mm.data.demo.root`), which also
  covers the demo ImageNet folders (``train/<wnid>/``, ``val/<wnid>/``).
"""
from __future__ import annotations

import os.path as osp

#: The marker a beit_mm demo generator writes into its root (:data:`beit_mm.data.demo.root.MARKER`).
DEMO_MARKER = '.beit_mm_demo.json'
#: The folder pairs that make a folder a dataset root when both are present: the layouts of mmseg's, mmdet's and
#: mmpretrain's datasets this project reads, and the custom layout.
DATASET_LAYOUTS = (('images', 'annotations'), ('images', 'masks'), ('leftImg8bit', 'gtFine'),
                   ('JPEGImages', 'SegmentationClassContext'), ('JPEGImages', 'SegmentationClass'),
                   ('train2017', 'annotations'), ('val2017', 'annotations'), ('train', 'meta'))


def dataset_layout(folder: str) -> tuple[str, ...] | None:
    """The first of :data:`DATASET_LAYOUTS` whose folders ``folder`` holds, or None."""
    for layout in DATASET_LAYOUTS:
        if all(osp.isdir(osp.join(folder, name)) for name in layout):
            return layout
    return None


def is_dataset_root(folder: str) -> bool:
    """Whether ``folder`` holds the two folders of one of :data:`DATASET_LAYOUTS`, or the demo marker."""
    return dataset_layout(folder) is not None or osp.lexists(osp.join(folder, DEMO_MARKER))


def enclosing_dataset_root(path: str, include_self: bool = True) -> str | None:
    """The nearest dataset root that ``path`` (links resolved) is, or lies in; None when there is none.

    Args:
        path: a file or folder, which need not exist (its existing ancestors are checked).
        include_self: whether ``path`` itself counts (False: only the folders above it).
    """
    current = osp.realpath(path)
    if not include_self:
        current = osp.dirname(current)
    while True:
        if osp.isdir(current) and is_dataset_root(current):
            return current
        parent = osp.dirname(current)
        if parent == current:
            return None
        current = parent
