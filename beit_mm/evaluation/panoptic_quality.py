"""Panoptic quality (Kirillov et al., CVPR 2019) as an MMEngine metric, counted by torchmetrics' ``PanopticQuality``.

mmdet's ``CocoPanopticMetric`` needs ``panopticapi``, which is not on PyPI; :class:`PanopticQualityMetric` reads the
same inputs (mmdet's data samples: ``pred_panoptic_seg.sem_seg`` with ``label + instance x INSTANCE_OFFSET``, the ground
truth PNG at ``seg_map_path`` with its ``segments_info``) and reports mmdet's names and table: ``PQ``, ``SQ``, ``RQ``,
``PQ_th``, ``SQ_th``, ``RQ_th``, ``PQ_st``, ``SQ_st``, ``RQ_st`` in percent, averaged as panopticapi does over the
categories with at least one true positive, false positive or false negative.

The rules (torchmetrics 1.9 ``functional/detection/_panoptic_quality_common.py``, the same as panopticapi's
``evaluation.py``): a predicted and a ground-truth segment of one category match when their IoU, void pixels left out of
the union, exceeds 0.5; an unmatched predicted segment is a false positive unless more than half of it is ground-truth
void, an unmatched ground-truth segment a false negative. As the official EoMT does (``training/lightning_module.py:251-262`` @ 7bd19dd), predicted void is declared to
torchmetrics as one more stuff category (``C``, left out of the averages) and ground-truth void as an unknown category
(torchmetrics' void): torchmetrics' own void in a *prediction* would excuse the ground-truth segments under it from
being false negatives, which panopticapi never does. One difference from panopticapi: a crowd region (``iscrowd``,
mmdet's ``is_thing=False`` on a thing class) is void here for every category, while panopticapi forgives only
predictions of the crowd's own category there.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from mmdet.evaluation.metrics.coco_panoptic_metric import parse_pq_results, print_panoptic_table
from mmdet.evaluation.functional import INSTANCE_OFFSET
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger
from torchmetrics.detection import PanopticQuality

from beit_mm.data.ade20k_panoptic import read_panoptic_segments
from beit_mm.data.coco_panoptic import rgb2id
from beit_mm.fileio.inputs import open_image
from beit_mm.registry import METRICS

GT_VOID = -1  # ground-truth void: a category torchmetrics does not know
STATES = ('iou_sum', 'true_positives', 'false_positives', 'false_negatives')


def panoptic_pairs(panoptic: np.ndarray | torch.Tensor, num_classes: int) -> torch.Tensor:
    """mmdet's panoptic map (H, W), ``label + instance x INSTANCE_OFFSET`` (a label >= ``num_classes``, e.g. mmdet's
    VOID ``num_classes`` or 255, is void) -> torchmetrics' (H, W, 2) ``(category, instance)``, void as category
    ``num_classes`` (declared a stuff category: see the module docstring)."""
    panoptic = torch.as_tensor(panoptic, dtype=torch.int64)
    label, instance = panoptic % INSTANCE_OFFSET, panoptic // INSTANCE_OFFSET
    void = label >= num_classes
    return torch.stack([label.masked_fill(void, num_classes), instance.masked_fill(void, 0)], dim=-1)


def ground_truth_pairs(segment_ids: np.ndarray, segments_info: Sequence[dict], num_classes: int,
                       thing_labels: set[int]) -> torch.Tensor:
    """A ground-truth segment-id map (H, W) and mmdet's ``segments_info`` (``id``, contiguous ``category``,
    ``is_thing``) -> (H, W, 2) ``(category, instance)``; pixels of no segment and crowd regions (a thing category with
    ``is_thing`` False) are void (category -1: unknown to torchmetrics, its void)."""
    out = torch.zeros(*segment_ids.shape, 2, dtype=torch.int64)
    out[..., 0] = GT_VOID
    ids = torch.as_tensor(segment_ids, dtype=torch.int64)
    for index, info in enumerate(segments_info, start=1):
        if info['category'] in thing_labels and not info['is_thing']:
            continue  # crowd
        inside = ids == info['id']
        out[inside] = torch.tensor([info['category'], index])
    return out


def ground_truth_segments(sample: dict) -> tuple[np.ndarray, Sequence[dict]]:
    """A data sample's ground-truth segment-id map (H, W) and mmdet's ``segments_info``: from the COCO panoptic PNG
    ``seg_map_path`` and its ``segments_info`` (mmdet's ``CocoPanopticDataset``), or, for a sample with an
    ``instance_map_path`` (``beit_mm.ADE20KPanopticDataset``), from the semantic and instance PNGs."""
    keys = ('seg_map_path', 'instance_map_path') if 'instance_map_path' in sample else ('seg_map_path',
                                                                                          'segments_info')
    missing = [k for k in keys if k not in sample]
    if missing:
        raise KeyError(f'PanopticQualityMetric: the data sample of {sample.get("img_path")} lacks '
                       f'{", ".join(missing)}. Fix: add {" and ".join(repr(k) for k in keys)} to the test '
                       'pipeline\'s PackDetInputs meta_keys, and use a panoptic model.')
    if 'instance_map_path' in sample:
        return read_panoptic_segments(sample['seg_map_path'], sample['instance_map_path'], sample.get('ori_shape'))
    with open_image(sample['seg_map_path']) as png:
        return rgb2id(np.asarray(png.convert('RGB'))), sample['segments_info']


@METRICS.register_module()
class PanopticQualityMetric(BaseMetric):
    """PQ, SQ and RQ over all, thing and stuff categories of mmdet's panoptic predictions (rules in the module
    docstring); the data samples need the meta keys ``seg_map_path`` and ``segments_info`` (``PackDetInputs(
    meta_keys=(..., 'seg_map_path', 'segments_info'))``; ADE20K panoptic: ``seg_map_path`` and ``instance_map_path``).

    Args:
        classwise: also print the per-category table (mmdet's ``classwise``).
        collect_device, prefix: as MMEngine's ``BaseMetric``.
    """
    default_prefix = 'coco_panoptic'

    def __init__(self, classwise: bool = False, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.classwise = classwise
        self._pq: PanopticQuality | None = None

    def _categories(self) -> tuple[int, list[int], list[int]]:
        """(number of classes, thing labels, stuff labels) from ``dataset_meta`` (contiguous labels, mmdet's order)."""
        meta = self.dataset_meta or {}
        if not {'classes', 'thing_classes', 'stuff_classes'} <= set(meta):
            raise ValueError('PanopticQualityMetric needs dataset_meta with classes, thing_classes and stuff_classes '
                             f'(got {sorted(meta)}). Fix: evaluate on mmdet\'s CocoPanopticDataset (or a dataset '
                             'whose metainfo names them), built by the Runner so that it passes its metainfo.')
        classes = list(meta['classes'])
        things = [i for i, name in enumerate(classes) if name in meta['thing_classes']]
        stuffs = [i for i, name in enumerate(classes) if name in meta['stuff_classes']]
        return len(classes), things, stuffs

    def _metric(self) -> PanopticQuality:
        if self._pq is None:
            _, things, stuffs = self._categories()
            num_classes = len(self.dataset_meta['classes'])  # predicted void: one more stuff category
            self._pq = PanopticQuality(things=things, stuffs=stuffs + [num_classes], return_sq_and_rq=True,
                                       return_per_class=True)
        return self._pq

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Count each image's matches; ``self.results`` gets its four per-category count vectors."""
        num_classes, things, _ = self._categories()
        metric = self._metric()
        for sample in data_samples:
            segment_ids, segments_info = ground_truth_segments(sample)
            if 'pred_panoptic_seg' not in sample:
                raise KeyError(f'PanopticQualityMetric: the data sample of {sample.get("img_path")} has no '
                               'pred_panoptic_seg. Fix: evaluate a panoptic model (task=\'panoptic\')')
            pred = panoptic_pairs(sample['pred_panoptic_seg']['sem_seg'][0].cpu(), num_classes)
            target = ground_truth_pairs(segment_ids, segments_info, num_classes, set(things))
            if pred.shape != target.shape:
                raise ValueError(f'PanopticQualityMetric: the prediction for {sample.get("img_path")} is '
                                 f'{tuple(pred.shape[:2])}, its ground truth {sample["seg_map_path"]} '
                                 f'{tuple(target.shape[:2])}. Fix: predict at the original size (mmdet\'s '
                                 'rescale=True).')
            metric.reset()
            metric.update(pred[None], target[None])
            self.results.append({name: getattr(metric, name).clone() for name in STATES})

    def compute_metrics(self, results: list) -> dict[str, float]:
        num_classes, things, stuffs = self._categories()
        metric = self._metric()
        for name in STATES:
            setattr(metric, name, sum(r[name] for r in results))
        per_class = metric.compute()  # (C + 1, 3): pq, sq, rq; torchmetrics orders things, then stuff and void
        order = sorted(things) + sorted(stuffs)  # the void category, last, is in no average
        counted = (metric.true_positives + metric.false_positives + metric.false_negatives) > 0
        pq_results = {}
        for name, labels in (('All', order), ('Things', things), ('Stuff', stuffs)):
            rows = torch.tensor([order.index(label) for label in labels], dtype=torch.int64)
            rows = rows[counted[rows]]
            mean = per_class[rows].double().mean(0) if len(rows) else torch.zeros(3, dtype=torch.float64)
            pq_results[name] = dict(pq=float(mean[0]), sq=float(mean[1]), rq=float(mean[2]), n=len(rows))
        classwise = None
        if self.classwise:
            classes = self.dataset_meta['classes']
            classwise = {classes[label]: dict(zip(('pq', 'sq', 'rq'), per_class[order.index(label)].tolist()))
                         for label in range(num_classes)}
        print_panoptic_table(pq_results, classwise, logger=MMLogger.get_current_instance())
        return parse_pq_results(pq_results)
