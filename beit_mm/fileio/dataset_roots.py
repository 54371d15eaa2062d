"""What counts as a dataset root, so that no output lands inside one: a folder holding both folders of one of
:data:`DATASET_LAYOUTS`, or a demo generator's :data:`DEMO_MARKER`."""
from __future__ import annotations

import os.path as osp

#: The marker a beit_mm demo generator writes first into its root.
DEMO_MARKER = '.beit_mm_demo.json'
#: The folder pairs that make a folder a dataset root when both are present (ADE20K, COCO, the custom layout,
#: Cityscapes, Pascal Context and VOC, COCO panoptic, ImageNet).
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
