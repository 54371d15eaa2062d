"""Optimizer updates under gradient accumulation: the unit that EoMT's schedules count.

With ``optim_wrapper=dict(accumulative_counts=A)`` MMEngine's ``OptimWrapper.update_params`` steps the optimizer after
every ``A``-th iteration and after the run's last one (``should_update``, mmengine 0.10
``optim/optimizer/optimizer_wrapper.py:335-346``), while ``ParamSchedulerHook`` steps iteration-based schedulers and
hooks read ``runner.iter`` every iteration. The official EoMT schedules (learning rate and mask annealing) count
Lightning's ``global_step``, the number of optimizer steps, which ``accumulate_grad_batches`` does not advance between
updates. So an iteration-counted schedule under accumulation would warm up, decay and anneal ``A`` times too early.

Iteration ``i`` (0-based, ``runner.iter`` before it) belongs to update ``i // A``: the forward of every micro-batch of
that update and the optimizer step that ends it see the rule at ``i // A``, as the batch-``A x b`` run's iteration
``i // A`` does.
"""
from __future__ import annotations

from mmengine.optim import OptimWrapper
from torch.optim import Optimizer


def accumulative_counts(optimizer: OptimWrapper | Optimizer) -> int:
    """``A``, the iterations per optimizer update: an ``OptimWrapper``'s ``accumulative_counts`` (MMEngine keeps it as
    ``_accumulative_counts``, ``optimizer_wrapper.py:124``, with no public reader), 1 for a bare torch optimizer."""
    if isinstance(optimizer, OptimWrapper):
        return int(optimizer._accumulative_counts)
    if isinstance(optimizer, Optimizer):
        return 1
    raise TypeError(f'cannot tell the optimizer updates of a {type(optimizer).__name__}; EoMT\'s schedules take one '
                    'OptimWrapper (not an OptimWrapperDict) or a torch optimizer')


def updates_done(iterations: int, counts: int) -> int:
    """The optimizer updates completed before iteration ``iterations`` (0-based) with ``counts`` iterations per
    update: ``iterations // counts``."""
    return iterations // counts


def total_updates(iterations: int, counts: int) -> int:
    """The optimizer updates of a run of ``iterations`` iterations: ``ceil(iterations / counts)`` (MMEngine steps after
    the last iteration even when fewer than ``counts`` were accumulated)."""
    return -(-iterations // counts)
