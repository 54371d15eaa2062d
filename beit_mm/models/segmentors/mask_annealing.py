"""EoMT's mask annealing: how likely each of the last ``L2`` blocks is to mask its queries' attention, per step.

In each masked block a query attends only to the patches inside its predicted mask; the mask is kept with a
probability annealed from 1 to 0, block after block, over the optimizer steps. Source:
github.com/tue-mps/eomt@7bd19dd, ``training/lightning_module.py:199-224``, ``models/eomt.py:71-82``.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def _block_probability(step: int, start: int, end: int, power: float) -> float:
    """One block's probability at ``step``, in float32 as the official."""
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
        step: optimizer updates done before this forward.
        start_steps: per masked block, first block first: the step at which its decay begins.
        end_steps: per masked block: the step from which its probability is 0.
        power: the polynomial power (official: 0.9).

    Returns:
        ``L2`` probabilities in [0, 1], float32 values: 1 before ``start_j``, 0 from ``end_j`` on,
        ``(1 - (step - start_j) / (end_j - start_j)) ** power`` between.

    Raises:
        ValueError: the step lists differ in length or a block ends before it starts.
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
    """Drop each query's mask with probability ``1 - prob``, one draw per (image, query).

    Args:
        attn_mask: ``(B, T, T)`` bool, ``T = num_queries + num_prefix_tokens + N``, tokens in that order,
            True = may attend; the query-to-patch block ``[:, :num_queries, num_queries + num_prefix_tokens:]``
            holds the predicted masks. Not modified.
        prob: this block's probability of keeping a query's mask; a 0-d tensor (read without a host sync) is drawn
            against even at 1.
        num_queries: ``K``, the queries at the front of the sequence.
        num_prefix_tokens: ``P``, class and register tokens between the queries and the patches (never masked).
        generator: source of the ``(B, K)`` uniform draw; None = the global RNG.

    Returns:
        ``attn_mask`` itself when ``prob >= 1`` (nothing drawn), else a new ``(B, T, T)`` bool tensor equal to
        ``attn_mask`` except that the rows of the queries with ``U[0, 1) > prob`` allow every patch.

    Raises:
        ValueError: ``prob`` is outside [0, 1] or ``attn_mask`` is not ``(B, T, T)`` bool.
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
