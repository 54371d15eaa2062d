"""Mask2Former's matching loss as EoMT trains with it (tue-mps/eomt@7bd19dd ``mask_classification_loss.py``).

Hungarian matching on ``num_points`` uniform points, then class cross-entropy and importance-sampled point BCE + dice
on the matched pairs, normalised by the matched pairs over all processes; points come from the global generator in
the reference's order.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmengine.dist import all_reduce
from scipy.optimize import linear_sum_assignment
from torch import Tensor, nn

from beit_mm.registry import MODELS


def semantic_targets(seg: Tensor, ignore_index: int = 255) -> tuple[Tensor, Tensor]:
    """Semantic map ``(H, W)`` -> one mask per class present ``(N, H, W)`` bool, classes ``(N,)``
    ascending; ``ignore_index`` pixels belong to no mask."""
    labels = seg.unique()
    labels = labels[labels != ignore_index].long()
    return seg[None] == labels[:, None, None], labels


def panoptic_targets(masks: Tensor, labels: Tensor, seg: Tensor | None, num_things: int,
                     ignore_index: int = 255) -> tuple[Tensor, Tensor]:
    """mmdet's ground truth of one image -> thing masks then stuff masks: ``(M, H, W)`` bool, ``(M,)`` int64.

    Things come from ``masks``/``labels`` (crowds left out), stuff classes from the semantic map ``seg`` (None for
    instance segmentation).
    """
    masks, labels = masks.bool(), labels.long()
    if seg is None:
        return masks, labels
    stuff_masks, stuff_labels = semantic_targets(seg, ignore_index)
    keep = stuff_labels >= num_things
    return (torch.cat([masks, stuff_masks[keep].to(masks.device)]),
            torch.cat([labels, stuff_labels[keep].to(labels.device)]))


def point_sample(maps: Tensor, points: Tensor) -> Tensor:
    """Bilinear values of ``maps`` ``(R, 1, H, W)`` at ``points`` ``(R, P, 2)`` (x, y in [0, 1]) -> ``(R, P)``."""
    return F.grid_sample(maps, 2.0 * points[:, :, None] - 1.0, align_corners=False)[:, 0, :, 0]


def pairwise_mask_costs(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Mask logits ``(Q, P)`` and targets ``(N, P)`` -> mean sigmoid CE and dice per pair, ``(Q, N)``."""
    num_points = logits.shape[1]
    # BCE(x, 1) = softplus(-x), BCE(x, 0) = softplus(x); each pair's mean over points as two matrix products.
    bce = (F.softplus(-logits) @ targets.T + F.softplus(logits) @ (1 - targets).T) / num_points
    probs = logits.sigmoid()
    dice = 1 - (2 * probs @ targets.T + 1) / (probs.sum(-1)[:, None] + targets.sum(-1)[None, :] + 1)
    return bce, dice


@torch.no_grad()
def hungarian_match(mask_logits: Tensor, class_logits: Tensor, masks: Tensor, labels: Tensor, *, class_weight: float,
                    mask_weight: float, dice_weight: float, num_points: int) -> tuple[Tensor, Tensor]:
    """One image's assignment of queries to targets.

    Args:
        mask_logits, class_logits: ``(Q, h, w)`` and ``(Q, C + 1)``, the last class "no object".
        masks, labels: ``(N, H, W)`` binary targets and their ``(N,)`` classes.
    Returns:
        ``(query_index, target_index)``, each ``(min(Q, N),)`` int64, query indices ascending.
    """
    points = torch.rand(1, num_points, 2, device=mask_logits.device)  # drawn even for N = 0, as the reference
    cost_class = -class_logits.softmax(-1)[:, labels]
    target_points = point_sample(masks[:, None].to(mask_logits), points.expand(len(masks), -1, -1))
    pred_points = point_sample(mask_logits[:, None], points.expand(len(mask_logits), -1, -1))
    bce, dice = pairwise_mask_costs(pred_points, target_points)
    cost = (mask_weight * bce + class_weight * cost_class + dice_weight * dice).clamp(-1e10, 1e10).nan_to_num(0)
    rows, cols = linear_sum_assignment(cost.cpu())
    return torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)


@torch.no_grad()
def uncertain_points(mask_logits: Tensor, num_points: int, oversample_ratio: float,
                     importance_sample_ratio: float) -> Tensor:
    """Mask2Former's training points for ``(R, 1, h, w)`` logits: the most uncertain of oversampled
    points, then uniform ones -> ``(R, num_points, 2)``."""
    num_masks = mask_logits.shape[0]
    candidates = torch.rand(num_masks, int(num_points * oversample_ratio), 2, device=mask_logits.device)
    uncertainty = -point_sample(mask_logits, candidates).abs()
    num_uncertain = int(importance_sample_ratio * num_points)
    chosen = uncertainty.topk(num_uncertain, dim=1).indices
    points = candidates.gather(1, chosen[..., None].expand(-1, -1, 2))
    num_random = num_points - num_uncertain
    if num_random > 0:
        points = torch.cat([points, torch.rand(num_masks, num_random, 2, device=mask_logits.device)], dim=1)
    return points


def pad_targets(masks: list[Tensor]) -> Tensor:
    """Target masks ``[(N_i, H_i, W_i)]`` -> ``(B, max N, max H, max W)`` float, zero-padded at the end of each axis."""
    num, height, width = (max(m.shape[i] for m in masks) for i in range(3))
    out = masks[0].new_zeros((len(masks), num, height, width), dtype=torch.float32)
    for out_i, m in zip(out, masks):
        out_i[:m.shape[0], :m.shape[1], :m.shape[2]] = m
    return out


@MODELS.register_module()
class MaskClassificationLoss(nn.Module):
    """Mask2Former's loss with EoMT's coefficients, for one set of predictions.

    Args:
        num_classes: ``C``; class logits carry ``C + 1`` entries, the last "no object".
        class_weight, mask_weight, dice_weight: the loss coefficients, also the matching costs.
        no_object_weight: cross-entropy weight of the no-object class.
        num_points, oversample_ratio, importance_sample_ratio: point sampling of the mask losses.
    """

    def __init__(self, num_classes: int, class_weight: float = 2.0, mask_weight: float = 5.0,
                 dice_weight: float = 5.0, no_object_weight: float = 0.1, num_points: int = 12544,
                 oversample_ratio: float = 3.0, importance_sample_ratio: float = 0.75):
        super().__init__()
        self.num_classes = num_classes
        self.class_weight, self.mask_weight, self.dice_weight = class_weight, mask_weight, dice_weight
        self.num_points = num_points
        self.oversample_ratio, self.importance_sample_ratio = oversample_ratio, importance_sample_ratio
        class_weights = torch.ones(num_classes + 1)
        class_weights[-1] = no_object_weight
        self.register_buffer('class_weights', class_weights, persistent=False)

    def forward(self, mask_logits: Tensor, class_logits: Tensor, masks: list[Tensor],
                labels: list[Tensor]) -> dict[str, Tensor]:
        """Args:
            mask_logits, class_logits: ``(B, Q, h, w)`` and ``(B, Q, C + 1)``.
            masks, labels: per image, ``(N_i, H, W)`` binary target masks and ``(N_i,)`` classes in ``[0, C)``.
        Returns:
            ``loss_cls``, ``loss_mask``, ``loss_dice``, each weighted.
        """
        if class_logits.shape[-1] != self.num_classes + 1:
            raise ValueError(f'class logits have {class_logits.shape[-1]} entries; expected num_classes + 1 = '
                             f'{self.num_classes + 1} (the last one "no object"). Fix: build the class head with '
                             f'num_classes + 1 outputs.')
        matches = [
            hungarian_match(m, c, t, lab, class_weight=self.class_weight, mask_weight=self.mask_weight,
                            dice_weight=self.dice_weight, num_points=self.num_points)
            for m, c, t, lab in zip(mask_logits, class_logits, masks, labels)
        ]
        image = torch.cat([torch.full_like(q, i) for i, (q, _) in enumerate(matches)]).to(mask_logits.device)
        query = torch.cat([q for q, _ in matches]).to(mask_logits.device)
        target = torch.cat([t for _, t in matches]).to(mask_logits.device)

        pred = mask_logits[image, query][:, None]  # (R, 1, h, w)
        gt = pad_targets(masks).to(mask_logits)[image, target][:, None]  # (R, 1, H, W)
        points = uncertain_points(pred, self.num_points, self.oversample_ratio, self.importance_sample_ratio)
        with torch.no_grad():
            gt_points = point_sample(gt, points)
        pred_points = point_sample(pred, points)
        num_masks = torch.tensor(float(len(query)), device=mask_logits.device)
        all_reduce(num_masks, op='mean')
        num_masks = num_masks.clamp(min=1)
        loss_mask = F.binary_cross_entropy_with_logits(pred_points, gt_points, reduction='none').mean(1).sum()
        probs = pred_points.sigmoid()
        dice = 1 - (2 * (probs * gt_points).sum(-1) + 1) / (probs.sum(-1) + gt_points.sum(-1) + 1)

        classes = torch.full(class_logits.shape[:2], self.num_classes, dtype=torch.int64, device=class_logits.device)
        classes[image, query] = torch.cat([lab[t] for lab, (_, t) in zip(labels, matches)]).to(classes)
        loss_cls = F.cross_entropy(class_logits.transpose(1, 2), classes, weight=self.class_weights.to(class_logits))
        return dict(loss_cls=self.class_weight * loss_cls, loss_mask=self.mask_weight * loss_mask / num_masks,
                    loss_dice=self.dice_weight * dice.sum() / num_masks)
