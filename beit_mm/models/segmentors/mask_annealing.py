"""EoMT's mask annealing: how likely each of the last ``L2`` blocks is to mask its queries' attention, per step.

EoMT (Kerssies et al., CVPR 2025, arXiv 2503.19108) prepends ``K`` queries to the tokens before the last ``L2`` blocks;
in each of them a query attends only to the patches inside its predicted mask, and the mask is kept with a
probability annealed from 1 to 0, block after block, during training. The rules follow github.com/tue-mps/eomt at
``7bd19dd`` (``training/lightning_module.py:199-224``, ``models/eomt.py:33,71-82,121-147``); each function cites its
lines. The step is the number of optimizer updates done (Lightning's ``global_step``). The rules in full, the
official configs' start and end steps and their pattern: docs/heads.md, "EoMT's mask annealing".
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
        step: optimizer updates done before this forward (``runner.iter // accumulative_counts`` at
            ``before_train_iter``, :mod:`beit_mm.engine.optim_updates`).
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


def anneal_attention_mask(attn_mask: Tensor, prob: float | Tensor, num_queries: int, num_prefix_tokens: int,
                          generator: torch.Generator | None = None) -> Tensor:
    """Drop each query's mask with probability ``1 - prob``, one draw per (image, query) (``models/eomt.py:71-82``).

    Args:
        attn_mask: ``(B, T, T)`` bool, ``T = num_queries + num_prefix_tokens + N``, tokens in that order,
            True = may attend; the query-to-patch block ``[:, :num_queries, num_queries + num_prefix_tokens:]``
            holds the predicted masks. Not modified.
        prob: this block's probability of keeping a query's mask (from :func:`mask_probabilities`); a 0-d tensor
            (EoMT's ``attn_mask_probs`` entry, read without a host sync) is drawn against even at 1.
        num_queries: ``K``, the queries at the front of the sequence.
        num_prefix_tokens: ``P``, class and register tokens between the queries and the patches (never masked).
        generator: where the ``(B, K)`` uniform draw comes from; None = the global RNG, as the official code.

    Returns:
        ``attn_mask`` itself when ``prob >= 1`` (nothing drawn), else a new ``(B, T, T)`` bool tensor equal to
        ``attn_mask`` except that the patch columns of the rows of the queries with ``U[0, 1) > prob`` are all True.
    """
    if not isinstance(prob, Tensor) and not 0.0 <= prob <= 1.0:
        raise ValueError(f'mask probability {prob} is outside [0, 1]; take it from mask_probabilities')
    if attn_mask.dtype != torch.bool or attn_mask.dim() != 3 or attn_mask.shape[1] != attn_mask.shape[2]:
        raise ValueError(f'attention mask must be (B, T, T) bool (True = may attend), got {tuple(attn_mask.shape)} '
                         f'{attn_mask.dtype}; expand it over heads after annealing')
    if not isinstance(prob, Tensor) and prob >= 1.0:
        return attn_mask
    drop = torch.rand((attn_mask.shape[0], num_queries), generator=generator, device=attn_mask.device) > prob
    out = attn_mask.clone()
    out[:, :num_queries, num_queries + num_prefix_tokens:] |= drop[:, :, None]
    return out
