"""beit_mm.models.losses.mask_classification against transformers 4.46.3's ``Mask2FormerLoss`` set up as EoMT does
(tue-mps/eomt @ 7bd19ddd621c5c6adedcd260458a34783cd4a45f ``training/mask_classification_loss.py``); both seeded
alike, fp32 ``max |diff| <= 1e-4`` on the losses and their gradients.

- EoMT: matcher costs = the loss coefficients, class 2.0, mask 5.0, dice 5.0 (lines 47-52), no-object 0.1, 12544
  points, oversampling 3.0, importance 0.75 (``training/mask_classification_semantic.py:30-38``), weighted as
  ``loss_total`` (lines 99-116); mask losses divided by the matched pairs, averaged over processes, clamped >= 1
  (lines 78-97); one binary mask per class present (``datasets/ade20k_semantic.py:47-59``).
- transformers ``models/mask2former/modeling_mask2former.py``: ``grid_sample`` points, ``align_corners=False``
  (250-280); costs clamped to +-1e10, NaN -> 0, ``linear_sum_assignment`` (418-480); dice with +1 (283-310, 333-352);
  BCE (313-330, 355-380); importance sampling (676-729); zero-padded targets (534-549); no-object labels (551-583)."""
import pytest
import torch
from transformers import Mask2FormerConfig
from transformers.models.mask2former.modeling_mask2former import Mask2FormerHungarianMatcher, Mask2FormerLoss

from beit_mm.models.losses import MaskClassificationLoss, hungarian_match, semantic_targets
from beit_mm.registry import MODELS

NUM_CLASSES = 5
# training/mask_classification_semantic.py:30-38
NUM_POINTS, OVERSAMPLE, IMPORTANCE = 12544, 3.0, 0.75
CLASS_W, MASK_W, DICE_W, NO_OBJECT_W = 2.0, 5.0, 5.0, 0.1
TOL = 1e-4


def reference_loss(num_classes: int = NUM_CLASSES) -> Mask2FormerLoss:
    config = Mask2FormerConfig(num_labels=num_classes, no_object_weight=NO_OBJECT_W, class_weight=CLASS_W,
                               mask_weight=MASK_W, dice_weight=DICE_W, train_num_points=NUM_POINTS,
                               oversample_ratio=OVERSAMPLE, importance_sample_ratio=IMPORTANCE)
    loss = Mask2FormerLoss(config, weight_dict={})
    loss.matcher = Mask2FormerHungarianMatcher(cost_class=CLASS_W, cost_mask=MASK_W, cost_dice=DICE_W,
                                               num_points=NUM_POINTS)
    return loss


def reference_total(losses: dict) -> dict:
    """EoMT's weights (``mask_classification_loss.py:104-111``) under beit_mm's names."""
    return dict(loss_cls=CLASS_W * losses['loss_cross_entropy'], loss_mask=MASK_W * losses['loss_mask'],
                loss_dice=DICE_W * losses['loss_dice'])


def make_batch(num_queries: int, seed: int = 0, size: int = 64, grid: int = 16):
    """Two images: random semantic maps of ``NUM_CLASSES`` classes with ignored pixels (255), blocky so that masks
    are regions; predictions ``(2, Q, grid, grid)`` and ``(2, Q, C + 1)``."""
    g = torch.Generator().manual_seed(seed)
    segs = []
    for present in (NUM_CLASSES, 3):
        coarse = torch.randint(0, present, (size // 8, size // 8), generator=g)
        seg = coarse.repeat_interleave(8, 0).repeat_interleave(8, 1)
        seg[torch.rand(size, size, generator=g) < 0.1] = 255
        segs.append(seg)
    targets = [semantic_targets(s) for s in segs]
    mask_logits = (3 * torch.randn(2, num_queries, grid, grid, generator=g)).requires_grad_()
    class_logits = torch.randn(2, num_queries, NUM_CLASSES + 1, generator=g).requires_grad_()
    return mask_logits, class_logits, [m for m, _ in targets], [lab for _, lab in targets]


def both(mask_logits, class_logits, masks, labels, seed: int = 1):
    ours_logits = [mask_logits.detach().clone().requires_grad_(), class_logits.detach().clone().requires_grad_()]
    ref_logits = [mask_logits.detach().clone().requires_grad_(), class_logits.detach().clone().requires_grad_()]
    torch.manual_seed(seed)
    ours = MaskClassificationLoss(NUM_CLASSES)(*ours_logits, masks, labels)
    torch.manual_seed(seed)
    ref = reference_total(reference_loss()(ref_logits[0], ref_logits[1], [m.float() for m in masks], labels))
    return ours, ref, ours_logits, ref_logits


def test_semantic_targets():
    seg = torch.tensor([[0, 0, 255], [3, 3, 0]])
    masks, labels = semantic_targets(seg)
    assert labels.tolist() == [0, 3]
    assert masks.tolist() == [[[True, True, False], [False, False, True]], [[False, False, False], [True, True, False]]]


@pytest.mark.parametrize('seed', [0, 1])
def test_loss_and_gradients_equal_transformers(seed):
    mask_logits, class_logits, masks, labels = make_batch(num_queries=8, seed=seed)
    ours, ref, ours_logits, ref_logits = both(mask_logits, class_logits, masks, labels, seed=seed + 10)
    assert set(ours) == set(ref)
    for key in ref:
        diff = float((ours[key] - ref[key]).detach().abs())
        assert diff <= TOL, f'{key}: ours {float(ours[key]):.6f}, transformers {float(ref[key]):.6f}'
    sum(ours.values()).backward()
    sum(ref.values()).backward()
    for name, got, want in zip(('mask logits', 'class logits'), ours_logits, ref_logits):
        diff = float((got.grad - want.grad).abs().max())
        assert diff <= TOL, f'gradient of the {name}: max |diff| {diff:.3e}'
        assert float(want.grad.abs().max()) > 1e-4, f'the reference gives no gradient to the {name}'


def test_matching_equals_transformers():
    mask_logits, class_logits, masks, labels = make_batch(num_queries=8, seed=3)
    matcher = Mask2FormerHungarianMatcher(cost_class=CLASS_W, cost_mask=MASK_W, cost_dice=DICE_W,
                                          num_points=NUM_POINTS)
    torch.manual_seed(5)
    want = matcher(mask_logits.detach(), class_logits.detach(), [m.float() for m in masks], labels)
    torch.manual_seed(5)
    for i, (rows, cols) in enumerate(want):
        got = hungarian_match(mask_logits[i].detach(), class_logits[i].detach(), masks[i], labels[i],
                              class_weight=CLASS_W, mask_weight=MASK_W, dice_weight=DICE_W, num_points=NUM_POINTS)
        assert got[0].tolist() == rows.tolist() and got[1].tolist() == cols.tolist(), f'image {i}'
        assert len(rows) == len(labels[i])


def test_fewer_queries_than_targets():
    """Q = 3 < N = 5 in the first image: 3 + 3 pairs matched, the mask losses divided by 6 (EoMT), where
    transformers divides by the 8 targets."""
    mask_logits, class_logits, masks, labels = make_batch(num_queries=3, seed=2)
    ours, ref, _, _ = both(mask_logits, class_logits, masks, labels)
    assert [len(lab) for lab in labels] == [5, 3]
    for key in ('loss_mask', 'loss_dice'):
        diff = float((ours[key] - ref[key] * 8 / 6).detach().abs())
        assert diff <= TOL, f'{key}: ours {float(ours[key]):.6f}, transformers x 8/6 {float(ref[key]) * 8 / 6:.6f}'
    assert float((ours["loss_cls"] - ref["loss_cls"]).detach().abs()) <= TOL


def test_built_from_registry_and_checks_class_count():
    loss = MODELS.build(dict(type='MaskClassificationLoss', num_classes=NUM_CLASSES, num_points=64))
    mask_logits, class_logits, masks, labels = make_batch(num_queries=8)
    with pytest.raises(ValueError, match='num_classes \\+ 1 = 6'):
        loss(mask_logits, class_logits[..., :-1], masks, labels)
    assert set(loss(mask_logits, class_logits, masks, labels)) == {'loss_cls', 'loss_mask', 'loss_dice'}


def test_image_without_targets():
    """An image whose pixels are all ignored has no target: its queries are all no-object, as in transformers."""
    mask_logits, class_logits, masks, labels = make_batch(num_queries=8)
    masks[1], labels[1] = semantic_targets(torch.full((64, 64), 255))
    assert masks[1].shape == (0, 64, 64)
    ours, ref, _, _ = both(mask_logits, class_logits, masks, labels)
    for key in ref:
        assert float((ours[key] - ref[key]).detach().abs()) <= TOL, key
