"""Panoptic quality (Kirillov et al., CVPR 2019) as an MMEngine metric, counted as cocodataset/panopticapi counts it.

mmdet's ``CocoPanopticMetric`` needs ``panopticapi``, which is not on PyPI; :class:`PanopticQualityMetric` reads the
same inputs (mmdet's data samples: ``pred_panoptic_seg.sem_seg`` with ``label + instance x INSTANCE_OFFSET``, the ground
truth PNG at ``seg_map_path`` with its ``segments_info``) and reports mmdet's names: ``PQ``, ``SQ``, ``RQ``, ``PQ_th``,
``SQ_th``, ``RQ_th``, ``PQ_st``, ``SQ_st``, ``RQ_st`` in percent.

The rule (cocodataset/panopticapi @ 7bb4655 ``panopticapi/evaluation.py``: ``pq_compute_single_core`` lines 77-165,
``PQStat.pq_average`` 49-73), per image:

- segments: each ground-truth segment id of the map, void = id 0 (``VOID``); each distinct value of the
  predicted map whose label is a class, void = label >= the number of classes. A crowd region is a ground-truth segment
  with ``iscrowd`` (mmdet: a thing category with ``is_thing`` False).
- a predicted and a non-crowd ground-truth segment of one category match when IoU > 0.5 strictly, IoU = intersection /
  (prediction area + ground-truth area - intersection - the prediction's void pixels) (lines 119-138): crowd pixels stay
  in the union; a crowd segment is never matched.
- an unmatched non-crowd ground-truth segment is a false negative (141-149); an unmatched prediction is a false positive
  unless (its void pixels + its pixels on the crowd region of its own category) / its area > 0.5, where a category's
  crowd region is its last crowd segment in ``segments_info`` (151-163).

Per category, summed over images: PQ = IoU sum / (TP + FP/2 + FN/2), SQ = IoU sum / TP (0 without TP), RQ = TP / (TP +
FP/2 + FN/2); each split (all, things, stuff) averages the categories with TP + FP + FN > 0, and a split with none is
reported as None (panopticapi divides by zero there). A segment of ``segments_info`` with no pixel in the map is none
(a COCO panoptic JSON lists none; an ADE20K stuff region wholly under instances vanishes). The official EoMT counts
with the same rule (tue-mps/eomt @ 7bd19dd ``training/lightning_module.py:322-384``) but of several crowd segments of
one category keeps whichever a set yields last.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from mmdet.evaluation.functional import INSTANCE_OFFSET
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger, print_log
from terminaltables import AsciiTable

from beit_mm.data.datasets.ade20k_panoptic import read_panoptic_segments
from beit_mm.data.datasets.coco_panoptic import rgb2id
from beit_mm.fileio.inputs import open_image
from beit_mm.registry import METRICS

GT_VOID = 0  # panopticapi's VOID: the ground-truth segment id of unlabelled pixels
COUNTS = ('iou', 'tp', 'fp', 'fn')
SPLITS = (('All', ''), ('Things', '_th'), ('Stuff', '_st'))


def image_counts(segment_ids: np.ndarray, segments_info: Sequence[dict], panoptic: np.ndarray, num_classes: int,
                 thing_labels: set[int]) -> dict[str, np.ndarray]:
    """One image's per-category counts by the rule of the module docstring.

    Args:
        segment_ids: the ground-truth segment-id map (H, W), 0 void.
        segments_info: mmdet's ``segments_info`` (``id``, contiguous ``category``, ``is_thing``).
        panoptic: the predicted map (H, W) in mmdet's encoding ``label + instance x INSTANCE_OFFSET``.
        num_classes: the number of classes; a predicted label >= it is void.
        thing_labels: the thing categories (a segment of one with ``is_thing`` False is a crowd region).

    Returns:
        ``iou`` (C,) float64, the IoU sum of the true positives; ``tp``, ``fp``, ``fn`` (C,) int64.
    """
    gt_values, gt_index = np.unique(np.asarray(segment_ids, np.int64), return_inverse=True)
    pred_values, pred_index = np.unique(np.asarray(panoptic, np.int64), return_inverse=True)
    pred_labels = pred_values % INSTANCE_OFFSET
    pred_kept = pred_labels < num_classes  # the rest is predicted void
    overlap = np.bincount(gt_index.ravel() * len(pred_values) + pred_index.ravel(),
                          minlength=len(gt_values) * len(pred_values)).reshape(len(gt_values), len(pred_values))
    pred_area, gt_area = overlap.sum(0), overlap.sum(1)
    pred_void = overlap[gt_values == GT_VOID].sum(0)  # each prediction's pixels on ground-truth void
    info = {s['id']: s for s in segments_info}
    gt_labels = np.array([info[v]['category'] if v in info else -1 for v in gt_values.tolist()])
    gt_crowd = np.array([v in info and info[v]['category'] in thing_labels and not info[v]['is_thing']
                         for v in gt_values.tolist()], dtype=bool)
    gt_kept = (gt_labels >= 0) & ~gt_crowd
    # IoU > 0.5 as integers: 2 x intersection > union; a segment matches at most once (two disjoint halves)
    union = pred_area[None] + gt_area[:, None] - overlap - pred_void[None]
    match = ((gt_labels[:, None] == pred_labels[None]) & gt_kept[:, None] & pred_kept[None] & (2 * overlap > union))
    gt_row, pred_col = np.nonzero(match)
    counts = {name: np.zeros(num_classes, np.float64 if name == 'iou' else np.int64) for name in COUNTS}
    np.add.at(counts['iou'], gt_labels[gt_row], overlap[gt_row, pred_col] / union[gt_row, pred_col])
    np.add.at(counts['tp'], gt_labels[gt_row], 1)
    missed = gt_kept & ~match.any(1)
    np.add.at(counts['fn'], gt_labels[missed], 1)
    crowd_id = {s['category']: s['id'] for s in segments_info  # category -> its last crowd segment
                if s['category'] in thing_labels and not s['is_thing']}
    row = {v: i for i, v in enumerate(gt_values.tolist())}
    for col in np.nonzero(pred_kept & ~match.any(0))[0].tolist():
        label = int(pred_labels[col])
        crowd = row.get(crowd_id.get(label))
        excused = pred_void[col] + (overlap[crowd, col] if crowd is not None else 0)
        if 2 * excused <= pred_area[col]:
            counts['fp'][label] += 1
    return counts


def average(counts: dict[str, np.ndarray], labels: Sequence[int]) -> dict:
    """panopticapi's ``pq_average`` over ``labels``: ``pq``, ``sq``, ``rq`` (fractions; None when no label has TP +
    FP + FN > 0), ``n`` (the labels counted) and ``per_class`` (label -> pq, sq, rq; 0 for a label not counted)."""
    per_class, means = {}, np.zeros(3)
    n = 0
    for label in labels:
        iou, tp, fp, fn = (counts[name][label] for name in COUNTS)
        if tp + fp + fn == 0:
            per_class[label] = dict(pq=0.0, sq=0.0, rq=0.0)
            continue
        n += 1
        denominator = tp + 0.5 * fp + 0.5 * fn
        per_class[label] = dict(pq=iou / denominator, sq=iou / tp if tp else 0.0, rq=tp / denominator)
        means += [per_class[label][k] for k in ('pq', 'sq', 'rq')]
    values = dict(zip(('pq', 'sq', 'rq'), (means / n).tolist())) if n else dict(pq=None, sq=None, rq=None)
    return dict(values, n=n, per_class=per_class)


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


def _percent(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _text(value: float | None) -> str:
    return 'n/a' if value is None else f'{100 * value:0.3f}'


@METRICS.register_module()
class PanopticQualityMetric(BaseMetric):
    """PQ, SQ and RQ over all, thing and stuff categories of mmdet's panoptic predictions (rule in the module
    docstring); the data samples need the meta keys ``seg_map_path`` and ``segments_info`` (``PackDetInputs(
    meta_keys=(..., 'seg_map_path', 'segments_info'))``; ADE20K panoptic: ``seg_map_path`` and ``instance_map_path``).

    Each image's per-category counts go to ``self.results``; MMEngine gathers them from every process and
    :meth:`compute_metrics` sums them on one, with no collective of its own.

    Args:
        classwise: also print the per-category table (mmdet's ``classwise``).
        collect_device, prefix: as MMEngine's ``BaseMetric``.
    """
    default_prefix = 'coco_panoptic'

    def __init__(self, classwise: bool = False, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.classwise = classwise

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

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Count each image's matches; ``self.results`` gets its per-category counts (:func:`image_counts`)."""
        num_classes, things, _ = self._categories()
        for sample in data_samples:
            segment_ids, segments_info = ground_truth_segments(sample)
            if 'pred_panoptic_seg' not in sample:
                raise KeyError(f'PanopticQualityMetric: the data sample of {sample.get("img_path")} has no '
                               'pred_panoptic_seg. Fix: evaluate a panoptic model (task=\'panoptic\')')
            pred = np.asarray(sample['pred_panoptic_seg']['sem_seg'][0].cpu(), np.int64)
            if pred.shape != segment_ids.shape:
                raise ValueError(f'PanopticQualityMetric: the prediction for {sample.get("img_path")} is '
                                 f'{pred.shape}, its ground truth {sample["seg_map_path"]} {segment_ids.shape}. '
                                 'Fix: predict at the original size (mmdet\'s rescale=True).')
            self.results.append(image_counts(segment_ids, segments_info, pred, num_classes, set(things)))

    def compute_metrics(self, results: list) -> dict[str, float | None]:
        """The counts summed over ``results`` -> mmdet's names in percent (None for a split with no counted
        category); prints mmdet's table (and the per-category one with ``classwise``)."""
        num_classes, things, stuffs = self._categories()
        counts = {name: sum((r[name] for r in results), np.zeros(num_classes)) for name in COUNTS}
        splits = {name: average(counts, labels)
                  for name, labels in (('All', things + stuffs), ('Things', things), ('Stuff', stuffs))}
        logger = MMLogger.get_current_instance()
        rows = [['', 'PQ', 'SQ', 'RQ', 'categories']]
        rows += [[name] + [_text(splits[name][k]) for k in ('pq', 'sq', 'rq')] + [splits[name]['n']]
                 for name, _ in SPLITS]
        print_log('Panoptic Evaluation Results:\n' + AsciiTable(rows).table, logger=logger)
        if self.classwise:
            classes = self.dataset_meta['classes']
            rows = [['category', 'PQ', 'SQ', 'RQ']]
            rows += [[classes[label]] + [_text(scores[k]) for k in ('pq', 'sq', 'rq')]
                     for label, scores in sorted(splits['All']['per_class'].items())]
            print_log('Classwise Panoptic Evaluation Results:\n' + AsciiTable(rows).table, logger=logger)
        return {f'{k.upper()}{suffix}': _percent(splits[name][k])
                for name, suffix in SPLITS for k in ('pq', 'sq', 'rq')}
