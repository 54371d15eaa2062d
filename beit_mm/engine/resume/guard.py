"""The resume guard: a resumed checkpoint validated as a whole before MMEngine acts on it.

MMEngine 0.10.7's ``Runner.load_checkpoint`` calls ``after_load_checkpoint`` right after opening the file, before
``EMAHook``, the weights, the loop counters, the seed, the message hub, the optimizer and the schedulers use it.
:class:`CheckpointGuardHook` runs there first (``HIGHEST``) and cleans the checkpoint in place
(:func:`~beit_mm.engine.resume.validate.validate_resume`). Every checkpoint records the batch it was trained with
(``before_save_checkpoint``); another global batch is refused unless ``schedule_in_samples``, which converts the
iteration counts so that the schedule continues in images seen. A ``load_from`` start is not checked here.
"""
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
    """Check a resumed checkpoint's training state in place before ``Runner.resume`` uses it (module docstring).

    Every training run gets it (:func:`use_checkpoint_guard_hook`); elsewhere:
    ``custom_hooks = [dict(type='beit_mm.CheckpointGuardHook')]``.
    """

    priority = 'HIGHEST'  # before RNGStateHook and every other after_load_checkpoint

    def __init__(self, schedule_in_samples: bool = False) -> None:
        self.schedule_in_samples = schedule_in_samples
        self._start = (0, 0)  # (images seen, iteration) where this run started counting

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner.train_loop, 'dataloader', None) is None:
            return  # a save outside training: no batch to record
        world_size, batch_size, counts = batch_now(runner)
        samples = self._start[0] + (runner.iter - self._start[1]) * world_size * batch_size
        checkpoint.setdefault('meta', {}).update(batch_record(world_size, batch_size, counts, samples))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        # MMEngine 0.10.7 keeps whether it resumes, and from which file, in these two attributes (Runner.__init__);
        # without load_from it resumes from find_latest_checkpoint(work_dir) (Runner.load_or_resume).
        # MMEngine's FlexibleRunner may keep the path in _resume itself.
        if not runner._resume:
            return
        path = str(runner._resume if isinstance(runner._resume, str) else (
            runner._load_from or find_latest_checkpoint(runner.work_dir)))
        report = validate_resume(runner, checkpoint, path, self.schedule_in_samples)
        if report.record is None:
            self._start = (0, 0)  # images seen before are unknown
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
    """Add ``beit_mm.CheckpointGuardHook`` to ``cfg.custom_hooks`` unless there; ``schedule_in_samples``
    (``--resume-schedule-in-samples``) is set on it either way."""
    ensure_custom_hook(cfg, CheckpointGuardHook, 'beit_mm.CheckpointGuardHook',
                       **({'schedule_in_samples': True} if schedule_in_samples else {}))
