"""Panoptic and instance results from mask-classification predictions by the official EoMT rules.

Source: github.com/tue-mps/eomt@7bd19dd, ``training/lightning_module.py:747-813``,
``training/mask_classification_instance.py:107-136``; class logits ``(Q, C + 1)``, the last "no object".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmdet.evaluation.functional import INSTANCE_OFFSET
from torch import Tensor


def to_original_size(mask_logits: Tensor, input_size: tuple[int, int], img_shape: tuple[int, int],
                     ori_shape: tuple[int, int]) -> Tensor:
    """Mask logits ``(Q, h, w)`` -> ``(Q, *ori_shape)``: resized, padding cropped, resized again."""
    logits = F.interpolate(mask_logits[None], input_size, mode='bilinear')
    return F.interpolate(logits[:, :, :img_shape[0], :img_shape[1]], ori_shape, mode='bilinear')[0]


def panoptic_segments(mask_logits: Tensor, class_logits: Tensor, num_things: int, mask_thresh: float = 0.8,
                      overlap_thresh: float = 0.8) -> Tensor:
    """One image's panoptic map ``(H, W)`` int64, mmdet's encoding (``C`` = void).

    Queries over ``mask_thresh`` claim the pixels where their ``score x sigmoid(mask)`` is largest; segments under
    ``overlap_thresh`` of their own mask are dropped, stuff segments of one class merged.
    """
    num_classes = class_logits.shape[-1] - 1
    scores, classes = class_logits.softmax(-1).max(-1)
    panoptic = torch.full(mask_logits.shape[-2:], num_classes, dtype=torch.int64, device=mask_logits.device)
    keep = classes.ne(num_classes) & (scores > mask_thresh)
    if not keep.any():
        return panoptic
    masks = mask_logits[keep].sigmoid()
    owner = (scores[keep][:, None, None] * masks).argmax(0)
    stuff_ids: dict[int, int] = {}
    segments = torch.full_like(panoptic, -1)
    segment_classes = []
    for k, class_id in enumerate(classes[keep].tolist()):
        own = masks[k] >= 0.5
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


def instance_results(mask_logits: Tensor, class_logits: Tensor, top_k: int = 100) -> tuple[Tensor, Tensor, Tensor]:
    """Top ``min(top_k, Q x C)`` query-class pairs: masks (K, H, W) bool, labels (K,), scores (K,)."""
    probs = class_logits.softmax(-1)[:, :-1]
    num_classes = probs.shape[-1]
    top_scores, top = probs.flatten().topk(min(top_k, probs.numel()), sorted=False)
    labels, queries = top % num_classes, top // num_classes
    logits = mask_logits[queries]
    masks = logits > 0
    mask_scores = (logits.sigmoid().flatten(1) * masks.flatten(1)).sum(1) / (masks.flatten(1).sum(1) + 1e-6)
    return masks, labels, top_scores * mask_scores
