"""Label maps at the input image's size without its class scores at that size: the scores are resized one class at
a time and folded into a running maximum, so the memory per input pixel is a fixed budget
(:data:`BYTES_PER_PIXEL`) whatever the number of classes (mmseg's ``postprocess_result`` holds every class's score
at full size: 4 x C bytes per pixel, 600 for ADE20K's 150 classes, 38 GB for an 8000 x 8000 image).
"""
from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import Tensor

#: Classes resized together: fewer passes over the output than one at a time, a fixed number of bytes per pixel.
CLASSES_PER_PASS = 8
#: The most :func:`upsampled_argmax` holds per output pixel, whatever the number of classes: while streaming,
#: :data:`CLASSES_PER_PASS` resized scores (float32), their maximum (float32) and its class (int64), the running
#: maximum (float32) and its class (int64), the new ones (float32, int64) and three masks (bool).
BYTES_PER_PIXEL = 4 * CLASSES_PER_PASS + 4 + 8 + 4 + 8 + 4 + 8 + 3


def upsampled_argmax(logits: Tensor, size: tuple[int, int], align_corners: bool) -> Tensor:
    """``F.interpolate(logits, size, mode='bilinear', align_corners=align_corners)[0].argmax(0)``, resized
    :data:`CLASSES_PER_PASS` classes at a time: the same labels (each class is resized as in the batched call; ties
    and NaN go to the first class, as ``argmax`` gives them).

    Args:
        logits: (1, C, h, w) class scores, C >= 1.
        size: (H, W) of the output.
        align_corners: as for ``F.interpolate``.

    Returns:
        (H, W) int64 class indices.
    """
    finite = bool(torch.isfinite(logits).all())  # then so is every resized score: no NaN to rank
    best = index = None
    for first in range(0, logits.shape[1], CLASSES_PER_PASS):
        scores = F.interpolate(logits[:, first:first + CLASSES_PER_PASS], size=size, mode='bilinear',
                               align_corners=align_corners)[0]
        score, which = scores.max(0)
        del scores
        if best is None:
            best, index = score, which
            continue
        better = score > best
        if not finite:
            better |= score.isnan() & ~best.isnan()  # argmax takes the first NaN as the maximum
        best = torch.where(better, score, best)
        index = torch.where(better, which.add_(first), index)
        del score, which, better
    return index


def streamed_postprocess_result(model, seg_logits: Tensor, data_samples: list | None = None) -> list:
    """mmseg's ``BaseSegmentor.postprocess_result`` with the full-size class scores streamed
    (:func:`upsampled_argmax`): ``pred_sem_seg`` only (no full-size ``seg_logits``); one class (a sigmoid
    threshold) and calls without ``data_samples`` go to mmseg's own.

    Args:
        model: the segmentor (its ``align_corners``).
        seg_logits: (B, C, h, w) scores of the padded inputs.
        data_samples: the batch's ``SegDataSample`` (``ori_shape``, padding, flip).

    Returns:
        ``data_samples`` with ``pred_sem_seg`` (1, H, W) int64 at each ``ori_shape``.
    """
    from mmengine.structures import PixelData
    from mmseg.models.segmentors.base import BaseSegmentor
    if data_samples is None or seg_logits.shape[1] == 1:
        return BaseSegmentor.postprocess_result(model, seg_logits, data_samples)
    _, _, height, width = seg_logits.shape
    for i, sample in enumerate(data_samples):
        meta = sample.metainfo
        left, right, top, bottom = meta.get('img_padding_size', meta.get('padding_size', [0] * 4))
        logits = seg_logits[i:i + 1, :, top:height - bottom, left:width - right]
        if meta.get('flip', None):
            logits = logits.flip(dims=(3,) if meta.get('flip_direction') == 'horizontal' else (2,))
        label = upsampled_argmax(logits, tuple(meta['ori_shape']), model.align_corners)
        sample.set_data({'pred_sem_seg': PixelData(data=label[None])})
    return data_samples


def stream_class_scores(model) -> None:
    """Make ``model.postprocess_result`` :func:`streamed_postprocess_result` for this instance (its ``predict``,
    mmseg's or EoMT's semantic one, calls it)."""
    model.postprocess_result = types.MethodType(streamed_postprocess_result, model)
