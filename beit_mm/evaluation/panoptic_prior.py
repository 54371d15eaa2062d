"""The trivial baseline of a panoptic number: the training split's most frequent label at each raster position
(:func:`positional_prior`), predicted for every validation image and scored (:func:`prior_panoptic_quality`).
"""
from __future__ import annotations

import numpy as np
import torch
from mmdet.evaluation.functional import INSTANCE_OFFSET
from PIL import Image
from scipy import ndimage

from .panoptic_quality import PanopticQualityMetric, ground_truth_segments

VOID = 255


def label_map(info: dict, things: set[int]) -> np.ndarray:
    """One data info's ground truth as labels (H, W) uint8: each segment's category, void (and crowd) 255."""
    segment_ids, segments = ground_truth_segments(info)
    labels = np.full(segment_ids.shape, VOID, np.uint8)
    for segment in segments:
        if segment['category'] in things and not segment['is_thing']:
            continue  # a crowd region: left void (the metric never matches one)
        labels[segment_ids == segment['id']] = segment['category']
    return labels


def _resized(labels: np.ndarray, height: int, width: int) -> np.ndarray:
    return np.asarray(Image.fromarray(labels).resize((width, height), resample=Image.NEAREST))


def _thing_labels(meta: dict) -> set[int]:
    return {i for i, name in enumerate(meta['classes']) if name in meta['thing_classes']}


def positional_prior(dataset, grid: int = 64) -> np.ndarray:
    """The most frequent label (void = 255 included) at each position of a ``grid`` x ``grid`` raster over
    ``dataset``'s ground truth, (grid, grid) uint8."""
    things = _thing_labels(dataset.metainfo)
    counts = np.zeros((256, grid, grid), np.int64)
    rows, cols = np.mgrid[0:grid, 0:grid]
    for index in range(len(dataset)):
        labels = _resized(label_map(dataset.get_data_info(index), things), grid, grid)
        np.add.at(counts, (labels, rows, cols), 1)
    return counts.argmax(0).astype(np.uint8)


def prior_prediction(prior: np.ndarray, height: int, width: int, things: set[int], num_classes: int) -> np.ndarray:
    """The prior at (height, width) in mmdet's panoptic encoding: ``label`` for stuff, ``label + k x INSTANCE_OFFSET``
    for the k-th connected region of a thing label, ``num_classes`` void."""
    labels = _resized(prior, height, width).astype(np.int64)
    out = np.where(labels == VOID, num_classes, labels)
    instance = 0
    for label in sorted(set(np.unique(labels).tolist()) & things):
        regions, count = ndimage.label(labels == label)
        for k in range(1, count + 1):
            instance += 1
            out[regions == k] = label + instance * INSTANCE_OFFSET
    return out


def prior_panoptic_quality(train_dataset, val_dataset, metric: PanopticQualityMetric | None = None,
                           grid: int = 64) -> dict[str, float]:
    """PQ/SQ/RQ (all, things, stuff; mmdet's names) of :func:`positional_prior` of ``train_dataset`` predicted for
    every image of ``val_dataset``, scored by ``metric`` (a default one if None)."""
    meta = val_dataset.metainfo
    things, num_classes = _thing_labels(meta), len(meta['classes'])
    prior = positional_prior(train_dataset, grid)
    metric = metric or PanopticQualityMetric()
    metric.dataset_meta = meta
    for index in range(len(val_dataset)):
        info = val_dataset.get_data_info(index)
        shape = (info['height'], info['width']) if 'height' in info else label_map(info, things).shape
        pred = prior_prediction(prior, *shape, things, num_classes)
        metric.process({}, [dict(info, ori_shape=shape, pred_panoptic_seg=dict(sem_seg=torch.from_numpy(pred)[None]))])
    return metric.compute_metrics(metric.results)
