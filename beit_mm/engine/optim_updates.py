"""Optimizer updates under gradient accumulation: iteration ``i`` (0-based) belongs to update ``i // A``."""
from __future__ import annotations

from mmengine.optim import OptimWrapper
from torch.optim import Optimizer


def accumulative_counts(optimizer: OptimWrapper | Optimizer) -> int:
    """``A``, the iterations per optimizer update (1 for a torch optimizer)."""
    if isinstance(optimizer, OptimWrapper):
        return int(optimizer._accumulative_counts)
    if isinstance(optimizer, Optimizer):
        return 1
    raise TypeError(f'cannot tell the optimizer updates of a {type(optimizer).__name__}; EoMT\'s schedules take one '
                    'OptimWrapper (not an OptimWrapperDict) or a torch optimizer')


def updates_done(iterations: int, counts: int) -> int:
    """The optimizer updates completed before the 0-based iteration ``iterations``."""
    return iterations // counts


def total_updates(iterations: int, counts: int) -> int:
    """The optimizer updates of a run of ``iterations`` iterations (a short last accumulation steps too)."""
    return -(-iterations // counts)
