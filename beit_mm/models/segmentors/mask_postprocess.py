"""Panoptic and instance results from mask-classification predictions by the official EoMT rules.

Source: github.com/tue-mps/eomt@7bd19dd, ``training/lightning_module.py:747-813``,
``training/mask_classification_instance.py:107-136``; class logits ``(Q, C + 1)``, the last "no object".

Masks are chosen from the class logits first and resized to the original size a few at a time
(:class:`OriginalSize`, :data:`CHUNK` queries): bilinear resizing is per channel, so each chosen mask equals its row of
the whole resized stack, and the peak memory is a few masks at the original size, not one per query.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmdet.evaluation.functional import INSTANCE_OFFSET
from torch import Tensor

#: Queries resized to the original size at once.
CHUNK = 4


def to_original_size(mask_logits: Tensor, input_size: tuple[int, int], img_shape: tuple[int, int],
                     ori_shape: tuple[int, int]) -> Tensor:
    """Mask logits ``(Q, h, w)`` -> ``(Q, *ori_shape)``: resized, padding cropped, resized again."""
    logits = F.interpolate(mask_logits[None], input_size, mode='bilinear')
    return F.interpolate(logits[:, :, :img_shape[0], :img_shape[1]], ori_shape, mode='bilinear')[0]


class OriginalSize:
    """:func:`to_original_size` for one image: mask logits ``(N, h, w)`` of the padded ``input_size`` input ->
    ``(N, *ori_shape)``; :attr:`shape` is ``ori_shape``."""

    def __init__(self, input_size: tuple[int, int], img_shape: tuple[int, int], ori_shape: tuple[int, int]) -> None:
        self.input_size = tuple(int(v) for v in input_size)
        self.img_shape = tuple(int(v) for v in img_shape[:2])
        self.shape = tuple(int(v) for v in ori_shape[:2])

    def __call__(self, mask_logits: Tensor) -> Tensor:
        return to_original_size(mask_logits, self.input_size, self.img_shape, self.shape)


class _SameSize(OriginalSize):
    """The identity, for mask logits already at the wanted size."""

    def __init__(self, shape: tuple[int, int]) -> None:
        super().__init__(shape, shape, shape)

    def __call__(self, mask_logits: Tensor) -> Tensor:
        return mask_logits


def _chunks(mask_logits: Tensor, rows: Tensor, resize: OriginalSize, chunk: int):
    """``(start, resized logits (n, *resize.shape))`` of ``mask_logits[rows]``, ``chunk`` rows at a time."""
    for start in range(0, len(rows), chunk):
        yield start, resize(mask_logits[rows[start:start + chunk]])


def panoptic_segments(mask_logits: Tensor, class_logits: Tensor, num_things: int, mask_thresh: float = 0.8,
                      overlap_thresh: float = 0.8, resize: OriginalSize | None = None, chunk: int = CHUNK) -> Tensor:
    """One image's panoptic map ``(H, W)`` int64, mmdet's encoding (``C`` = void).

    Args:
        mask_logits: ``(Q, h, w)``; at ``(H, W)`` unless ``resize`` maps them there.
        class_logits: ``(Q, C + 1)``.
        resize: applied to the chosen queries' masks, ``chunk`` at a time (None: already at the size).

    Queries over ``mask_thresh`` claim the pixels where their ``score x sigmoid(mask)`` is largest; segments under
    ``overlap_thresh`` of their own mask are dropped, stuff segments of one class merged.
    """
    resize = resize or _SameSize(mask_logits.shape[-2:])
    num_classes = class_logits.shape[-1] - 1
    scores, classes = class_logits.softmax(-1).max(-1)
    panoptic = torch.full(resize.shape, num_classes, dtype=torch.int64, device=mask_logits.device)
    keep = classes.ne(num_classes) & (scores > mask_thresh)
    if not keep.any():
        return panoptic
    kept, kept_scores = keep.nonzero()[:, 0], scores[keep]
    best = torch.full(resize.shape, -float('inf'), device=mask_logits.device)
    owner = torch.zeros(resize.shape, dtype=torch.int64, device=mask_logits.device)
    for start, logits in _chunks(mask_logits, kept, resize, chunk):  # argmax over the kept queries, first of equals
        weighted = kept_scores[start:start + len(logits), None, None] * logits.sigmoid()
        index = weighted.argmax(0)
        value = weighted.gather(0, index[None])[0]
        better = value > best
        best = torch.where(better, value, best)
        owner = torch.where(better, index + start, owner)
    del best
    stuff_ids: dict[int, int] = {}
    segments = torch.full_like(panoptic, -1)
    segment_classes = []
    kept_classes = classes[keep].tolist()
    for start, logits in _chunks(mask_logits, kept, resize, chunk):
        for offset, own in enumerate(logits.sigmoid() >= 0.5):
            k = start + offset
            class_id = kept_classes[k]
            won = owner == k
            final = own & won
            own_area, won_area = own.sum().item(), won.sum().item()
            if own_area == 0 or won_area == 0 or final.sum().item() == 0 or won_area / own_area < overlap_thresh:
                continue
            if class_id >= num_things:  # stuff: one segment per class
                if class_id in stuff_ids:
                    segments[final] = stuff_ids[class_id]
                    continue
                stuff_ids[class_id] = len(segment_classes)
            segments[final] = len(segment_classes)
            segment_classes.append(class_id)
    for segment, class_id in enumerate(segment_classes):
        inside = segments == segment
        panoptic[inside] = class_id if class_id >= num_things else class_id + (segment + 1) * INSTANCE_OFFSET
    return panoptic


def instance_results(mask_logits: Tensor, class_logits: Tensor, top_k: int = 100, resize: OriginalSize | None = None,
                     chunk: int = CHUNK) -> tuple[Tensor, Tensor, Tensor]:
    """Top ``K = min(top_k, Q x C)`` query-class pairs: masks (K, H, W) bool, labels (K,), scores (K,).

    Args:
        mask_logits: ``(Q, h, w)``; at ``(H, W)`` unless ``resize`` maps them there.
        class_logits: ``(Q, C + 1)``.
        resize: applied to the chosen pairs' masks, ``chunk`` at a time (None: already at the size).
    """
    resize = resize or _SameSize(mask_logits.shape[-2:])
    probs = class_logits.softmax(-1)[:, :-1]
    num_classes = probs.shape[-1]
    top_scores, top = probs.flatten().topk(min(top_k, probs.numel()), sorted=False)
    labels, queries = top % num_classes, top // num_classes
    masks = torch.empty((len(queries), *resize.shape), dtype=torch.bool, device=mask_logits.device)
    mask_scores = torch.empty(len(queries), dtype=mask_logits.dtype, device=mask_logits.device)
    for start, logits in _chunks(mask_logits, queries, resize, chunk):
        end = start + len(logits)
        masks[start:end] = inside = logits > 0
        mask_scores[start:end] = ((logits.sigmoid().flatten(1) * inside.flatten(1)).sum(1)
                                  / (inside.flatten(1).sum(1) + 1e-6))
    return masks, labels, top_scores * mask_scores
