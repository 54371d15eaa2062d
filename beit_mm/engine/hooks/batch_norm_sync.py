"""The same BatchNorm running statistics on every process of a run, so that validation and the checkpoint see one
model.

Plain BatchNorm (a config's ``BN``, or ``SyncBN`` turned into ``BN`` for a CPU run, :mod:`beit_mm.engine.launch`)
updates its running mean and variance from each process's own batches, and MMEngine's DDP wrapper does not broadcast
buffers (``broadcast_buffers=False``; its validation calls the module directly, past DDP's forward). Without a
synchronisation every process validates with statistics of its own while the checkpoint holds process 0's: the
validation metric is then of a model that no checkpoint holds. MMEngine's ``SyncBuffersHook`` averages the buffers
before a validation, which in an iteration-based loop comes after that iteration's checkpoint was written.
"""
from __future__ import annotations

import torch
from mmengine.config import Config
from mmengine.dist import all_reduce
from mmengine.hooks import Hook
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from beit_mm.registry import HOOKS

from .atomic_checkpoint import ensure_custom_hook


def batch_norm_statistics(model: nn.Module) -> list[torch.Tensor]:
    """The running means and variances of ``model``'s BatchNorm layers that keep them, SyncBatchNorm excepted (its
    statistics are of the global batch already), in module order."""
    return [stat for module in model.modules()
            if isinstance(module, _BatchNorm) and not isinstance(module, nn.SyncBatchNorm)
            and module.track_running_stats and module.running_mean is not None
            for stat in (module.running_mean, module.running_var)]


@HOOKS.register_module()
class BatchNormSyncHook(Hook):
    """After every training iteration, each running mean and variance of the model's BatchNorm layers (not
    SyncBatchNorm) becomes its mean over the processes; a no-op in a single process.

    With equal batches per process the mean of the processes' running means is SyncBatchNorm's running mean; the
    mean of their running variances leaves out the spread between the processes' batch means. The normalisation
    inside a training step stays per process (plain BatchNorm's).
    """

    priority = 'ABOVE_NORMAL'  # before EMAHook copies the buffers (NORMAL) and CheckpointHook saves them (VERY_LOW)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        stats = batch_norm_statistics(runner.model)
        if not stats:
            return
        flat = torch.cat([stat.detach().flatten().float() for stat in stats])
        all_reduce(flat, op='mean')  # MMEngine's: a no-op without a process group of several processes
        offset = 0
        for stat in stats:
            stat.copy_(flat[offset:offset + stat.numel()].view_as(stat))
            offset += stat.numel()


def use_batch_norm_sync_hook(cfg: Config) -> None:
    """Add ``beit_mm.BatchNormSyncHook`` to ``cfg.custom_hooks`` (unless there) for a launched run
    (``cfg.launcher != 'none'``); what :func:`beit_mm.apis.train.train` does for every config."""
    if cfg.get('launcher', 'none') == 'none':
        return
    ensure_custom_hook(cfg, BatchNormSyncHook, 'beit_mm.BatchNormSyncHook')
