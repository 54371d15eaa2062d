"""Optimizer updates under gradient accumulation: the unit EoMT's schedules count.

With ``accumulative_counts=A`` MMEngine steps the optimizer after every ``A``-th iteration (and the last), while
schedulers and hooks see every iteration; the official EoMT counts Lightning's ``global_step``, the optimizer steps.
Iteration ``i`` (0-based) belongs to update ``i // A``.
"""
from __future__ import annotations

from mmengine.optim import OptimWrapper
from torch.optim import Optimizer


def accumulative_counts(optimizer: OptimWrapper | Optimizer) -> int:
    """``A``, the iterations per optimizer update: an ``OptimWrapper``'s ``_accumulative_counts``, 1 for a torch
    optimizer."""
    if isinstance(optimizer, OptimWrapper):
        return int(optimizer._accumulative_counts)
    if isinstance(optimizer, Optimizer):
        return 1
    raise TypeError(f'cannot tell the optimizer updates of a {type(optimizer).__name__}; EoMT\'s schedules take one '
                    'OptimWrapper (not an OptimWrapperDict) or a torch optimizer')


def updates_done(iterations: int, counts: int) -> int:
    """The optimizer updates completed before the 0-based iteration ``iterations``: ``iterations // counts``."""
    return iterations // counts


def total_updates(iterations: int, counts: int) -> int:
    """The optimizer updates of a run of ``iterations`` iterations: ``ceil(iterations / counts)`` (MMEngine also
    steps after a short last accumulation)."""
    return -(-iterations // counts)
