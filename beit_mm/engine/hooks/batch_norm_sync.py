"""The same BatchNorm running statistics on every process of a run, so that validation and the checkpoint see one
model (MMEngine's DDP does not broadcast buffers, and ``SyncBuffersHook`` runs after the checkpoint)."""
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
    """The running means and variances of ``model``'s non-synced BatchNorm layers, in module order."""
    return [stat for module in model.modules()
            if isinstance(module, _BatchNorm) and not isinstance(module, nn.SyncBatchNorm)
            and module.track_running_stats and module.running_mean is not None
            for stat in (module.running_mean, module.running_var)]


@HOOKS.register_module()
class BatchNormSyncHook(Hook):
    """After every training iteration, average the model's BatchNorm running statistics over the processes."""

    priority = 'ABOVE_NORMAL'  # before EMAHook (NORMAL) and CheckpointHook (VERY_LOW)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        stats = batch_norm_statistics(runner.model)
        if not stats:
            return
        flat = torch.cat([stat.detach().flatten().float() for stat in stats])
        all_reduce(flat, op='mean')
        offset = 0
        for stat in stats:
            stat.copy_(flat[offset:offset + stat.numel()].view_as(stat))
            offset += stat.numel()


def use_batch_norm_sync_hook(cfg: Config) -> None:
    """Add ``beit_mm.BatchNormSyncHook`` to ``cfg.custom_hooks`` for a launched run."""
    if cfg.get('launcher', 'none') == 'none':
        return
    ensure_custom_hook(cfg, BatchNormSyncHook, 'beit_mm.BatchNormSyncHook')
