"""COCO box and mask AP against the evaluated dataset's own annotations (:class:`DatasetCocoMetric`).

mmdet's ``CocoMetric`` with ``ann_file=None`` takes the ground truth from the data samples' ``instances`` (the
dataset's parsed annotations, mmdet 3.3.0 ``evaluation/metrics/coco_metric.py:377-382``), so the metric reads what the
dataloader reads wherever its ``data_root`` points. Its conversion gives every annotation its box's area
(``coco_metric.py:318``), which moves objects between COCO's small, medium and large ranges; here the area is the
segmentation's pixel area, as COCO's annotation files hold it (``pycocotools.mask.area``).
"""
from __future__ import annotations

from typing import Sequence

from mmdet.datasets.api_wrappers import COCO
from mmdet.evaluation.metrics import CocoMetric
from pycocotools import mask as mask_util

from beit_mm.registry import METRICS


def segmentation_area(segmentation: list | dict, height: int, width: int) -> float:
    """The pixel area of a COCO segmentation: polygons (merged), uncompressed RLE (``counts`` a list) or compressed
    RLE, in an image of ``height`` x ``width``."""
    if isinstance(segmentation, list):
        rle = mask_util.merge(mask_util.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation['counts'], list):
        rle = mask_util.frPyObjects(segmentation, height, width)
    else:
        rle = segmentation
    return float(mask_util.area(rle))


def coco_ground_truth(gts: Sequence[dict], classes: Sequence[str]) -> COCO:
    """An in-memory COCO index of the dataset's annotations.

    Args:
        gts: per image ``img_id``, ``width``, ``height`` and ``anns``, the dataset's ``instances`` (``bbox`` x1, y1,
            x2, y2 in pixels, ``bbox_label``, ``ignore_flag`` 1 for crowd regions, optional ``mask``).
        classes: the dataset's class names; category id ``i`` is ``classes[i]``.

    Returns:
        mmdet's ``COCO`` over these images, each annotation's ``area`` its mask's pixel area (its box's without one).
    """
    images, annotations = [], []
    for gt in gts:
        images.append(dict(id=gt['img_id'], width=gt['width'], height=gt['height'], file_name=''))
        for ann in gt['anns']:
            x1, y1, x2, y2 = ann['bbox']
            annotation = dict(id=len(annotations) + 1, image_id=gt['img_id'], category_id=int(ann['bbox_label']),
                              bbox=[x1, y1, x2 - x1, y2 - y1], iscrowd=int(ann.get('ignore_flag', 0)),
                              area=(x2 - x1) * (y2 - y1))
            if ann.get('mask'):
                annotation['segmentation'] = ann['mask']
                annotation['area'] = segmentation_area(ann['mask'], gt['height'], gt['width'])
            annotations.append(annotation)
    coco = COCO()
    coco.dataset = dict(images=images, annotations=annotations,
                        categories=[dict(id=i, name=name) for i, name in enumerate(classes)])
    coco.createIndex()
    coco.img_ann_map, coco.cat_img_map = coco.imgToAnns, coco.catToImgs  # mmdet's aliases, bound by its __init__
    return coco


@METRICS.register_module()
class DatasetCocoMetric(CocoMetric):
    """mmdet's ``CocoMetric`` (every argument but ``ann_file``) scoring against the evaluated dataset's annotations.

    The data samples carry the dataset's ``instances``: ``PackDetInputs(meta_keys=(..., 'instances'))`` in the test
    pipeline.

    Raises:
        ValueError: an ``ann_file`` is given.
        KeyError: a data sample has no ``instances``.
    """

    def __init__(self, **kwargs) -> None:
        if kwargs.get('ann_file') is not None:
            raise ValueError(f'DatasetCocoMetric reads the ground truth from the dataset, not ann_file='
                             f'{kwargs["ann_file"]!r}. Fix: drop ann_file, or use mmdet.CocoMetric to score against '
                             'that file')
        super().__init__(**kwargs)

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Keep each sample's predictions and, until the ground truth is indexed, its ``instances``."""
        if self._coco_api is None:
            for sample in data_samples:
                if 'instances' not in sample:
                    raise KeyError(f'DatasetCocoMetric: the data sample of {sample.get("img_path")} has no '
                                   "'instances'. Fix: add 'instances' to the meta_keys of the test pipeline's "
                                   'PackDetInputs')
        super().process(data_batch, data_samples)

    def compute_metrics(self, results: list) -> dict[str, float]:
        """mmdet's metrics over ``results`` ((ground truth, prediction) pairs of every process)."""
        if self._coco_api is None:
            self._coco_api = coco_ground_truth([gt for gt, _ in results], self.dataset_meta['classes'])
        return super().compute_metrics(results)
