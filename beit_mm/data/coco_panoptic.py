"""COCO panoptic PNGs without ``panopticapi`` (not on PyPI): the id encoding and mmdet's loading transform.

A COCO panoptic PNG stores each pixel's segment id as RGB, ``id = R + 256 G + 256^2 B``, 0 = void (panopticapi
``utils.py``: ``rgb2id``, ``id2rgb``). mmdet 3.3's ``LoadPanopticAnnotations`` imports panopticapi only for ``rgb2id``;
:class:`LoadPanopticAnnotations` is that transform with :func:`rgb2id` from here, the loading itself mmdet's.
"""
from __future__ import annotations

import numpy as np
from mmdet.datasets.transforms import LoadAnnotations as DetLoadAnnotations
from mmdet.datasets.transforms import LoadPanopticAnnotations as DetLoadPanopticAnnotations

from beit_mm.registry import TRANSFORMS


def rgb2id(rgb: np.ndarray) -> np.ndarray:
    """A panoptic PNG's (H, W, 3) RGB -> segment ids (H, W) int64, ``R + 256 G + 256^2 B``."""
    rgb = np.asarray(rgb).astype(np.int64)
    return rgb[..., 0] + 256 * rgb[..., 1] + 256**2 * rgb[..., 2]


def id2rgb(segment_ids: np.ndarray) -> np.ndarray:
    """The inverse of :func:`rgb2id`: segment ids (H, W) below 256^3 -> (H, W, 3) uint8."""
    segment_ids = np.asarray(segment_ids, dtype=np.int64)
    return np.stack([(segment_ids // 256**i) % 256 for i in range(3)], axis=-1).astype(np.uint8)


@TRANSFORMS.register_module()
class LoadPanopticAnnotations(DetLoadPanopticAnnotations):
    """mmdet's ``LoadPanopticAnnotations`` (boxes, labels, thing masks ``gt_masks``, semantic map ``gt_seg_map`` with
    things ``0..T-1``, stuff ``T..C-1``, 255 void) with :func:`rgb2id` in place of panopticapi's; same arguments."""

    def __init__(self, with_bbox: bool = True, with_label: bool = True, with_mask: bool = True, with_seg: bool = True,
                 box_type: str = 'hbox', imdecode_backend: str = 'cv2', backend_args: dict | None = None) -> None:
        DetLoadAnnotations.__init__(self, with_bbox=with_bbox, with_label=with_label, with_mask=with_mask,
                                    with_seg=with_seg, with_keypoints=False, box_type=box_type,
                                    imdecode_backend=imdecode_backend, backend_args=backend_args)
        self.rgb2id = rgb2id
