"""The resume guard: a resumed checkpoint validated as a whole, in ``after_load_checkpoint``, before MMEngine's
Runner uses any of it; every checkpoint records the batch it was trained with."""
from __future__ import annotations

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner.checkpoint import find_latest_checkpoint

from ...registry import HOOKS
from ..hooks.atomic_checkpoint import ensure_custom_hook
from .counters import batch_now, batch_record
from .validate import validate_resume


@HOOKS.register_module()
class CheckpointGuardHook(Hook):
    """Check a resumed checkpoint's training state in place before ``Runner.resume`` uses it."""

    priority = 'HIGHEST'

    def __init__(self, schedule_in_samples: bool = False) -> None:
        self.schedule_in_samples = schedule_in_samples
        self._start = (0, 0)  # (images seen, iteration) where this run started counting

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner.train_loop, 'dataloader', None) is None:
            return
        world_size, batch_size, counts = batch_now(runner)
        samples = self._start[0] + (runner.iter - self._start[1]) * world_size * batch_size
        checkpoint.setdefault('meta', {}).update(batch_record(world_size, batch_size, counts, samples))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        # MMEngine keeps whether it resumes, and from which file, in these private attributes
        if not runner._resume:
            return
        path = str(runner._resume if isinstance(runner._resume, str) else (
            runner._load_from or find_latest_checkpoint(runner.work_dir)))
        report = validate_resume(runner, checkpoint, path, self.schedule_in_samples)
        if report.record is None:
            self._start = (0, 0)
            if getattr(runner.train_loop, 'dataloader', None) is not None:
                runner.logger.warning(
                    f'resuming from {path}: it does not record the processes and batch it was trained with (written '
                    'before beit_mm recorded them); resumed as it is. Check that processes x batch x accumulation '
                    '(%d x %d x %d) are those it was trained with' % batch_now(runner))
        else:
            self._start = (report.samples_seen, report.iter_after)
            if report.ratio is not None:
                world_size, batch_size, _ = batch_now(runner)
                runner.logger.warning(
                    f'resuming from {path}: {report.record[0]} x {report.record[1]} images per iteration then, '
                    f'{world_size} x {batch_size} now: iteration {report.iter_before} -> {report.iter_after} '
                    f'(max_iters {runner.max_iters}), the schedule continues counted in images seen '
                    f'({report.samples_seen} so far)')
        if report.dropped:
            runner.logger.warning(f'resuming from {path}: dropped {"; ".join(report.dropped)}. A resumed checkpoint '
                                  f'steers no file but the checkpoints of its own work dir ({runner.work_dir}) and '
                                  'nothing but what this run reads')


def use_checkpoint_guard_hook(cfg: Config, schedule_in_samples: bool = False) -> None:
    """Add ``beit_mm.CheckpointGuardHook`` to ``cfg.custom_hooks`` and set its ``schedule_in_samples``."""
    ensure_custom_hook(cfg, CheckpointGuardHook, 'beit_mm.CheckpointGuardHook',
                       **({'schedule_in_samples': True} if schedule_in_samples else {}))
