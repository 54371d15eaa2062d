"""A warning at the start of training when the effective batch size differs from the recipe's published one
(``auto_scale_lr.base_batch_size``): a smaller batch at the same lr silently costs accuracy."""
from typing import Optional

from mmengine.dist import get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log

from beit_mm.registry import HOOKS


def effective_batch_size(world_size: int, batch_per_process: int, accumulative_counts: int) -> int:
    """Images per optimizer update: ``world_size * batch_per_process * accumulative_counts``."""
    return world_size * batch_per_process * accumulative_counts


def batch_size_warning(world_size: int, batch_per_process: int, accumulative_counts: int,
                       published: Optional[int], auto_scale_lr: bool) -> Optional[str]:
    """The warning for this run's batch, or None.

    Args:
        world_size: number of training processes.
        batch_per_process: ``train_dataloader.batch_size``.
        accumulative_counts: ``optim_wrapper.accumulative_counts``.
        published: ``auto_scale_lr.base_batch_size``, or None.
        auto_scale_lr: ``auto_scale_lr.enable``.
    """
    if published is None:
        return None
    effective = effective_batch_size(world_size, batch_per_process, accumulative_counts)
    if auto_scale_lr:
        if accumulative_counts > 1:
            return (f'auto_scale_lr is on with accumulative_counts={accumulative_counts}: MMEngine scales the lr by '
                    f'{world_size} processes x {batch_per_process} / {published} and ignores accumulation, while an '
                    f'update here averages {effective} images; turn auto_scale_lr off and set the lr by hand, or drop '
                    'accumulation')
        return None
    if effective == published:
        return None
    return (f'effective batch size {effective} ({world_size} processes x {batch_per_process} per process x '
            f'{accumulative_counts} accumulation steps) differs from the recipe\'s {published} '
            '(auto_scale_lr.base_batch_size) and auto_scale_lr is off, so the lr was tuned for another batch: expect '
            f'a lower result than published. Train with {published} images per update (more processes, a larger '
            'train_dataloader.batch_size, or optim_wrapper.accumulative_counts), or pass --cfg-options '
            'auto_scale_lr.enable=True to scale the lr linearly')


@HOOKS.register_module()
class BatchSizeCheckHook(Hook):
    """Logs a warning before training when the effective batch differs from ``auto_scale_lr.base_batch_size``."""

    priority = 'VERY_LOW'

    def before_train(self, runner) -> None:
        cfg = runner.cfg
        auto_scale = cfg.get('auto_scale_lr') or {}
        accumulative_counts = int((cfg.get('optim_wrapper') or {}).get('accumulative_counts', 1))
        message = batch_size_warning(
            world_size=get_world_size(),
            batch_per_process=int(cfg.train_dataloader.batch_size),
            accumulative_counts=accumulative_counts,
            published=auto_scale.get('base_batch_size'),
            auto_scale_lr=bool(auto_scale.get('enable', False)))
        if message is not None:
            print_log(message, logger='current', level=30)
