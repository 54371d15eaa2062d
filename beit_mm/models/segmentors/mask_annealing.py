"""EoMT's mask annealing: the probability that each masked block keeps its queries' attention masks, per step.

Source: github.com/tue-mps/eomt@7bd19dd, ``training/lightning_module.py:199-224``, ``models/eomt.py:71-82``.
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
    """Per masked block, the probability of keeping a query's mask at step ``step``.

    Args:
        step: optimizer updates done before this forward.
        start_steps, end_steps: per masked block, where its decay begins and where it reaches 0.
        power: the polynomial power.
    Returns:
        ``L2`` float32 values: ``(1 - (step - start_j) / (end_j - start_j)) ** power`` clamped to [0, 1].
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
        attn_mask: ``(B, T, T)`` bool, True = may attend, tokens ``[K queries, P prefix, patches]``; not modified.
        prob: 0-d tensor (drawn against even at 1) or float.
        num_queries, num_prefix_tokens: ``K`` and ``P``.
        generator: source of the ``(B, K)`` uniform draw; None = the global RNG.
    Returns:
        ``attn_mask`` itself when ``prob >= 1``, else a copy whose dropped queries' rows allow every patch.
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
