"""ADE20K panoptic segmentation read as the official EoMT reads it: the semantic and instance PNGs, no conversion.

Layout (``data_root``)::

    ADEChallengeData2016/images/{training,validation}/ADE_*.jpg
    ADEChallengeData2016/annotations/{training,validation}/ADE_*.png            uint8: 0 "other", 1..150 the classes
    ADEChallengeData2016/annotations_instance/{training,validation}/ADE_*.png   RGB: R the instance category 1..100
                                                                                 (0 none), G the instance id (0 none)

The segments of one image (tue-mps/eomt@7bd19dd ``datasets/ade20k_panoptic.py:153-181``): one per stuff class in the
semantic PNG, then one per instance id, of category ``R - 1``; later segments cover earlier ones. Labels follow mmdet's
``ADE20KPanopticDataset.METAINFO``: the 100 things, then the 50 stuff classes, each in ADE20K's order.
"""
from __future__ import annotations

import os.path as osp

import numpy as np
from mmcv.transforms import BaseTransform
from mmdet.datasets import ADE20KPanopticDataset as DetADE20KPanopticDataset
from mmdet.datasets.base_det_dataset import BaseDetDataset
from mmdet.structures.mask import BitmapMasks
from mmengine import fileio

from ...fileio.inputs import open_image
from ...registry import DATASETS, TRANSFORMS
from ..checks import DatasetCheckError

NUM_CLASSES = 150
#: The stuff classes as indices of ADE20K's 150.
STUFF = (0, 1, 2, 3, 4, 5, 6, 9, 11, 13, 16, 17, 21, 25, 26, 28, 29, 34, 40, 46, 48, 51, 52, 54, 59, 60, 61, 63, 68, 77,
         79, 84, 91, 94, 96, 99, 100, 101, 105, 106, 109, 113, 114, 117, 122, 128, 131, 140, 141, 145)
#: The thing classes as indices of ADE20K's 150, instance category ``i`` (R - 1) being ``THINGS[i]``.
THINGS = tuple(i for i in range(NUM_CLASSES) if i not in STUFF)
#: Label (mmdet's order) -> index of ADE20K's 150 (the official class head's row): things, then stuff.
OFFICIAL_ORDER = THINGS + STUFF
#: Index of ADE20K's 150 -> stuff label, for the semantic PNG's stuff classes.
_STUFF_LABEL = {index: len(THINGS) + rank for rank, index in enumerate(STUFF)}


def panoptic_segments(semantic: np.ndarray, instance: np.ndarray, source: str = 'the instance PNG'
                      ) -> tuple[np.ndarray, list[dict]]:
    """Semantic PNG (H, W) and instance PNG (H, W, 3) -> segment-id map (H, W) int64 (0 void) and ``segments_info``.

    Raises:
        DatasetCheckError: an instance with no or several categories, or a category above 100.
    """
    if semantic.shape != instance.shape[:2]:
        raise DatasetCheckError(f'{source} is {instance.shape[1]}x{instance.shape[0]} but its semantic PNG '
                                f'{semantic.shape[1]}x{semantic.shape[0]}. Fix: pair each image with its own '
                                'annotations (annotations/ and annotations_instance/ of the same release)')
    segment_ids = np.zeros(semantic.shape, np.int64)
    segments = []
    for value in np.unique(semantic).tolist():
        if 1 <= value <= NUM_CLASSES and value - 1 in _STUFF_LABEL:
            segments.append(dict(id=len(segments) + 1, category=_STUFF_LABEL[value - 1], is_thing=False))
            segment_ids[semantic == value] = segments[-1]['id']
    categories, ids = instance[..., 0], instance[..., 1]
    for value in np.unique(ids).tolist():
        if value == 0:
            continue
        mask = ids == value
        found = np.unique(categories[mask]).tolist()
        if len(found) != 1 or not 1 <= found[0] <= len(THINGS):
            raise DatasetCheckError(f'{source}: instance {value} (G channel) has the category value(s) {found[:5]} '
                                    f'(R channel); each instance needs exactly one category in 1..{len(THINGS)}. Fix: '
                                    'use the scene-parsing challenge\'s annotations_instance PNGs unchanged (R the '
                                    'instance category, G the instance id)')
        segments.append(dict(id=len(segments) + 1, category=found[0] - 1, is_thing=True))
        segment_ids[mask] = segments[-1]['id']
    return segment_ids, segments


def read_panoptic_segments(seg_map_path: str, instance_map_path: str, shape: tuple[int, int] | None = None
                           ) -> tuple[np.ndarray, list[dict]]:
    """:func:`panoptic_segments` of one image's PNGs, the semantic one resized (nearest) to ``shape``."""
    with open_image(seg_map_path) as png:
        if shape is not None and png.size != (shape[1], shape[0]):
            png = png.resize((shape[1], shape[0]), resample=0)
        semantic = np.asarray(png)
    with open_image(instance_map_path) as png:
        instance = np.asarray(png.convert('RGB'))
    if semantic.ndim != 2:
        raise DatasetCheckError(f'{seg_map_path} is not a single-channel label map (shape {semantic.shape}). Fix: use '
                                'ADEChallengeData2016/annotations/*.png, the class index per pixel')
    return panoptic_segments(semantic, instance, instance_map_path)


@DATASETS.register_module()
class ADE20KPanopticDataset(BaseDetDataset):
    """ADE20K panoptic with mmdet's ``ADE20KPanopticDataset`` metainfo; samples carry ``img_path``, ``seg_map_path``
    and ``instance_map_path``.

    Args:
        data_prefix: ``img``, ``seg`` (semantic PNGs) and ``instance`` (instance PNGs) folders under ``data_root``.
        **kwargs: mmdet's ``BaseDetDataset`` arguments.
    """
    METAINFO = DetADE20KPanopticDataset.METAINFO

    def __init__(self, data_prefix: dict = dict(img='images/training/', seg='annotations/training/',
                                                 instance='annotations_instance/training/'), **kwargs) -> None:
        super().__init__(data_prefix=data_prefix, **kwargs)

    def load_data_list(self) -> list[dict]:
        """Every ``*.jpg`` under ``data_prefix.img``, sorted, paired with ``<stem>.png`` in the other two folders."""
        folders = {key: self.data_prefix.get(key) for key in ('img', 'seg', 'instance')}
        missing = [f'{key}: {path}' for key, path in folders.items() if not path or not osp.isdir(path)]
        if missing:
            raise DatasetCheckError(
                f'ADE20KPanopticDataset: folder(s) not found: {"; ".join(missing)}. Fix: unpack '
                'ADEChallengeData2016.zip and annotations_instance.tar (sceneparsing.csail.mit.edu) so that '
                f'{self.data_root} holds images/, annotations/ and annotations_instance/, or set data_root')
        images = sorted(fileio.list_dir_or_file(folders['img'], list_dir=False, suffix='.jpg', recursive=True))
        if not images:
            raise DatasetCheckError(f'ADE20KPanopticDataset: no .jpg image under {folders["img"]}. Fix: point '
                                    'data_root/data_prefix.img at ADEChallengeData2016/images/<split>/')
        data_list, lacking = [], []
        for index, name in enumerate(images):
            stem = osp.splitext(name)[0] + '.png'
            info = dict(img_path=osp.join(folders['img'], name), img_id=index,
                        seg_map_path=osp.join(folders['seg'], stem),
                        instance_map_path=osp.join(folders['instance'], stem))
            lacking += [p for p in (info['seg_map_path'], info['instance_map_path']) if not osp.isfile(p)]
            data_list.append(info)
        if lacking:
            raise DatasetCheckError(f'ADE20KPanopticDataset: {len(lacking)} annotation PNG(s) missing, e.g. '
                                    f'{", ".join(lacking[:3])}. Fix: every image needs <stem>.png in both '
                                    f'{folders["seg"]} and {folders["instance"]}')
        return data_list

    def filter_data(self) -> list[dict]:
        """Every image: the segments are known only once the PNGs are read."""
        return self.data_list


@TRANSFORMS.register_module()
class LoadADE20KPanopticAnnotations(BaseTransform):
    """The targets of one ADE20K panoptic sample as mmdet's ``LoadPanopticAnnotations`` gives them for COCO (255 void);
    put it after ``LoadImageFromFile``."""

    def transform(self, results: dict) -> dict:
        height, width = results['ori_shape']
        segment_ids, segments = read_panoptic_segments(results['seg_map_path'], results['instance_map_path'],
                                                       (height, width))
        gt_seg = np.full((height, width), 255, np.uint8)
        masks, labels = [], []
        for segment in segments:
            mask = segment_ids == segment['id']
            if not mask.any():
                continue
            gt_seg[mask] = segment['category']
            if segment['is_thing']:
                masks.append(mask.astype(np.uint8))
                labels.append(segment['category'])
        results['gt_masks'] = BitmapMasks(masks, height, width)
        results['gt_bboxes'] = results['gt_masks'].get_bboxes(dst_type='hbox')
        results['gt_bboxes_labels'] = np.asarray(labels, np.int64)
        results['gt_ignore_flags'] = np.zeros(len(labels), bool)
        results['gt_seg_map'] = gt_seg
        return results
