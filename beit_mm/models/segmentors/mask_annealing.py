"""EoMT's mask annealing: how likely each of the last ``L2`` blocks is to mask its queries' attention, per step.

EoMT (Kerssies et al., CVPR 2025, arXiv 2503.19108) prepends ``K`` queries to the tokens before the last ``L2`` blocks
of a plain ViT. In each of those blocks the queries attend only to the patches inside the mask predicted from the
block's input; the mask is kept with a probability that is annealed from 1 to 0, block after block, during training.

Every rule below cites the official code, github.com/tue-mps/eomt at commit
``7bd19ddd621c5c6adedcd260458a34783cd4a45f`` (MIT License). Paths are relative to that repository.

Schedule (:func:`mask_probabilities`)
    - One probability per masked block, the first of the last ``L2`` blocks first; all start at 1
      (``models/eomt.py:33``, buffer ``attn_mask_probs = ones(num_blocks)``). Block ``i`` of the backbone uses entry
      ``i - depth + L2`` (``models/eomt.py:142-147``).
    - Block ``j`` has its own ``start_j`` and ``end_j``; at step ``t`` its probability is 1 if ``t < start_j``, 0 if
      ``t >= end_j``, otherwise ``(1 - (t - start_j) / (end_j - start_j)) ** poly_power``
      (``training/lightning_module.py:199-209``). The progress is a Python float, the power is taken in float32
      (the buffer's dtype, ``lightning_module.py:201,208``); this module does the same, so its values are the official
      float32 values.
    - ``t`` is Lightning's ``global_step`` (the number of optimizer steps done), read in ``on_train_batch_end``, after
      the step (``lightning_module.py:211-224``); the new values serve the next batch's forward. So the forward of the
      batch after ``t`` optimizer steps uses the rule at ``t``: MMEngine's ``runner.iter`` in ``before_train_iter``
      (without gradient accumulation, which no official config uses). The very first batch uses the buffer's ones,
      which is the rule at 0 unless some ``end_j`` is 0 (no official config has one).
    - Annealing off (``attn_mask_annealing_enabled: False``, ``lightning_module.py:218``) leaves every probability at 1:
      masks always, at inference too.
    - ``poly_power`` is the same argument as the learning-rate schedule's power (``lightning_module.py:159``),
      default 0.9 (``training/mask_classification_semantic.py:33``, ``mask_classification_panoptic.py:33``,
      ``mask_classification_instance.py:36``); no official config sets it.

Application (:func:`anneal_attention_mask`)
    - The attention mask is ``(B, T, T)`` bool, ``T = K + P + N`` tokens in that order (queries, prefix tokens: class
      and registers, patches), **True = may attend** (``models/eomt.py:121-141``; SDPA's boolean convention,
      ``eomt.py:108``; eager: ``masked_fill(~mask, -inf)``, ``eomt.py:112``). Only the query-to-patch block
      ``[:, :K, K+P:]`` holds a prediction (``interpolated mask logits > 0``); all else is True. It is expanded to
      ``(B, heads, T, T)`` later (``eomt.py:93,103``), so heads share one draw.
    - For ``p < 1`` one uniform number is drawn per (image, query) from the global RNG, ``torch.rand(B, K) > p``
      choosing the queries whose row of the query-to-patch block becomes all True (mask dropped); a query keeps its
      mask with probability ``p`` (``eomt.py:71-82``). For ``p >= 1`` nothing is drawn (``eomt.py:73``), which keeps
      the global RNG stream as the official run has it.
    - There is no separate inference path: ``eval()`` changes nothing here (``eomt.py:150-179``); the model uses the
      probabilities it holds, checkpointed in the buffer. After the last ``end_j`` all are 0 and every query's mask
      is dropped (save a draw of exactly 0.0, which ``torch.rand`` can return: 2**-24 per query on the CPU), so a
      trained model sees no masks. A validation run in the middle of training still masks with the current
      probabilities.

Official defaults (configs ``configs/<backbone>/<dataset>/<task>/eomt_<size>_<res>.yaml`` lines 12-14, instance 13-15;
``num_blocks`` default 4, ``models/eomt.py:24``, else set at line 19 or 23; all with ``attn_mask_annealing_enabled:
True``, ``masked_attn_enabled`` True by default ``eomt.py:25``, ``poly_power`` 0.9; steps are optimizer steps):

=====================================  ===  ==  ======  =============================  =============================
config                                 K    L2  epochs  start steps                    end steps
=====================================  ===  ==  ======  =============================  =============================
dinov2 ade20k semantic large_512       100  4   31      6520 13040 19560 26080         13040 19560 26080 32600
dinov2 ade20k panoptic large_640/1280  200  4   31      6520 13040 19560 26080         13040 19560 26080 32600
dinov2 ade20k panoptic giant_640/1280  200  5   31      6520 11410 16300 21190 26080   13040 17930 22820 27710 32600
dinov2 cityscapes semantic large_1024  100  4   107     3317 6634 9951 13268           6634 9951 13268 16585
dinov2 coco pan/inst large_640/1280    200  4   12      14782 29564 44346 59128        29564 44346 59128 73910
dinov2 coco panoptic giant_640/1280    200  5   12      14782 25869 36955 48042 59128  29564 40651 51737 62824 73910
dinov2 coco panoptic small/base_640    200  3   12      14782 36955 59128              29564 51737 73910
dinov2 coco panoptic s/b_640_2x        200  3   24      29564 73910 118256             59128 103474 147820
dinov3 ade20k semantic large_512       100  4   16      0 6520 9780 13040              3000 9780 13040 16300
dinov3 coco panoptic large_640/1280    200  4   12      0 29564 44346 59128            3000 44346 59128 73910
dinov3 coco instance large_640/1280    200  4   12      14782 29564 44346 59128        29564 44346 59128 73910
dinov3 coco panoptic s/b_640_2x        200  3   24      0 73910 118256                 3000 103474 147820
=====================================  ===  ==  ======  =============================  =============================

The code holds no formula for these numbers; they are explicit lists. Their pattern (read off the table, not stated
by the authors): with ``U`` about a sixth of the run (6520, 3317, 14782, 29564), block ``j`` of ``L2`` anneals over
``[s_j, s_j + U]`` with ``s_j`` evenly spaced from ``U`` to ``4U`` (``U, 2U, 3U, 4U`` for 4 blocks; ``U, 2.5U, 4U``
for 3; steps of ``0.75U`` for 5) and the last ends at ``5U``: 4 blocks anneal end to end, 3 leave gaps of ``0.5U``,
5 overlap by ``0.25U``; earlier blocks never have a higher probability than later ones. The DINOv3 configs
anneal their first block over the warm-up instead (``[0, 3000]``, ``warmup_steps: [2000, 3000]``); DINOv3 ADE20K
uses ``U = 3260`` for the others.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def _block_probability(step: int, start: int, end: int, power: float) -> float:
    """One block's probability at ``step`` (``training/lightning_module.py:199-209``), in float32 as the official."""
    if step < start:
        return 1.0
    if step >= end:
        return 0.0
    progress = torch.tensor((step - start) / (end - start), dtype=torch.float32)
    return float((1.0 - progress).pow(power))


def mask_probabilities(step: int, start_steps: Sequence[int], end_steps: Sequence[int],
                       power: float) -> list[float]:
    """The probability that each masked block keeps a query's attention mask at training step ``step``.

    Args:
        step: optimizer steps done before this forward (MMEngine's ``runner.iter`` at ``before_train_iter``).
        start_steps: per masked block, first block first (``L2`` entries): the step at which its decay begins.
        end_steps: per masked block: the step from which its probability is 0.
        power: the polynomial power (official: 0.9, the learning-rate schedule's ``poly_power``).

    Returns:
        ``L2`` probabilities in [0, 1], float32 values: 1 before ``start_j``, 0 from ``end_j`` on,
        ``(1 - (step - start_j) / (end_j - start_j)) ** power`` between.
    """
    if len(start_steps) != len(end_steps):
        raise ValueError(f'mask annealing has {len(start_steps)} start steps but {len(end_steps)} end steps; '
                         'give one start and one end per masked block')
    for j, (start, end) in enumerate(zip(start_steps, end_steps)):
        if end < start:
            raise ValueError(f'mask annealing block {j} ends (step {end}) before it starts (step {start}); '
                             'swap them or give end >= start')
    return [_block_probability(step, start, end, power) for start, end in zip(start_steps, end_steps)]


def anneal_attention_mask(attn_mask: Tensor, prob: float, num_queries: int, num_prefix_tokens: int,
                          generator: torch.Generator | None = None) -> Tensor:
    """Drop each query's mask with probability ``1 - prob``, one draw per (image, query) (``models/eomt.py:71-82``).

    Args:
        attn_mask: ``(B, T, T)`` bool, ``T = num_queries + num_prefix_tokens + N``, tokens in that order,
            True = may attend; the query-to-patch block ``[:, :num_queries, num_queries + num_prefix_tokens:]``
            holds the predicted masks. Not modified.
        prob: this block's probability of keeping a query's mask (from :func:`mask_probabilities`).
        num_queries: ``K``, the queries at the front of the sequence.
        num_prefix_tokens: ``P``, class and register tokens between the queries and the patches (never masked).
        generator: where the ``(B, K)`` uniform draw comes from; None = the global RNG, as the official code.

    Returns:
        ``attn_mask`` itself when ``prob >= 1`` (nothing drawn), else a new ``(B, T, T)`` bool tensor equal to
        ``attn_mask`` except that the patch columns of the rows of the queries with ``U[0, 1) > prob`` are all True.
    """
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f'mask probability {prob} is outside [0, 1]; take it from mask_probabilities')
    if attn_mask.dtype != torch.bool or attn_mask.dim() != 3 or attn_mask.shape[1] != attn_mask.shape[2]:
        raise ValueError(f'attention mask must be (B, T, T) bool (True = may attend), got {tuple(attn_mask.shape)} '
                         f'{attn_mask.dtype}; expand it over heads after annealing')
    if prob >= 1.0:
        return attn_mask
    drop = torch.rand((attn_mask.shape[0], num_queries), generator=generator, device=attn_mask.device) > prob
    out = attn_mask.clone()
    out[:, :num_queries, num_queries + num_prefix_tokens:] |= drop[:, :, None]
    return out
