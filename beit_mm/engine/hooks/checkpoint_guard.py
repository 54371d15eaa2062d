"""A resumed checkpoint's training state is checked before MMEngine acts on it (:mod:`beit_mm.fileio.training_state`).

MMEngine 0.10.7's ``Runner.resume`` calls ``load_checkpoint``, whose first step after opening the file is
``call_hook('after_load_checkpoint', checkpoint=...)``; only then does it load the weights, set the loop's
``_iter``/``_epoch`` from ``meta``, re-seed from ``meta.seed``, load the message hub (which ``CheckpointHook`` reads
in ``before_train``) and the optimizer state. :class:`CheckpointGuardHook` runs there, first of all hooks
(``HIGHEST``; ``RNGStateHook`` keeps the generator states in the same call), and checks and cleans the checkpoint in
place: counters within this run's schedule, a seed numpy accepts, generator states the generators accept, file-naming
runtime values only for this work dir's own checkpoints, optimizer state of the parameters' shapes and dtypes. A
refusal is a :class:`~beit_mm.fileio.training_state.TrainingStateError`, which ``tools/train.py`` prints as one line.

Every checkpoint records the batch it was trained with in ``meta`` (``before_save_checkpoint``: processes, images per
process, accumulation, images seen; :func:`~beit_mm.fileio.training_state.batch_record`). A resume compares it with
this run's: another global batch per update is refused with the fixes named, unless the run is told to continue
(``schedule_in_samples``, ``tools/train.py --resume-schedule-in-samples``); where an iteration sees another number
of images, every iteration count (``meta.iter``, the schedulers' iteration state, an ``IterBasedTrainLoop``'s
``max_iters``) is converted so that the schedule continues counted in images seen (docs/faults.md, "Resuming with
another number of GPUs"). A checkpoint without the record resumes as it is, with a warning.

A ``load_from`` start (no resume) uses only the weights: nothing is checked then. Under MMEngine's ``FlexibleRunner``
(FSDP, DeepSpeed) the optimizer state has the strategy's layout and is left to it; the rest is checked.
"""
from __future__ import annotations

from mmengine.config import Config
from mmengine.dist import get_world_size
from mmengine.hooks import Hook
from mmengine.runner import IterBasedTrainLoop
from mmengine.runner.checkpoint import find_latest_checkpoint

from beit_mm.fileio.training_state import (batch_record, check_batch, check_optimizer_state, rescale_iterations,
                                           same_run, validate_runtime_state)
from beit_mm.registry import HOOKS


@HOOKS.register_module()
class CheckpointGuardHook(Hook):
    """Check a resumed checkpoint's training state in place before ``Runner.resume`` uses it (module docstring).

    ``tools/train.py`` adds it to every config (:func:`use_checkpoint_guard_hook`); elsewhere:
    ``custom_hooks = [dict(type='beit_mm.CheckpointGuardHook')]``.
    """

    priority = 'HIGHEST'  # before RNGStateHook and every other after_load_checkpoint

    def __init__(self, schedule_in_samples: bool = False) -> None:
        self.schedule_in_samples = schedule_in_samples
        self._start = (0, 0)  # (images seen, iteration) where this run started counting

    @staticmethod
    def _batch_now(runner) -> tuple[int, int, int]:
        """(processes, images per process per iteration, iterations per optimizer update) of this run."""
        wrapper = runner.optim_wrapper
        if isinstance(wrapper, dict):
            counts = wrapper.get('accumulative_counts', 1)
        else:
            counts = getattr(wrapper, '_accumulative_counts', 1)
        return get_world_size(), int(runner.train_dataloader.batch_size), int(counts)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner.train_loop, 'dataloader', None) is None:
            return  # a save outside training: no batch to record
        world_size, batch_size, counts = self._batch_now(runner)
        samples = self._start[0] + (runner.iter - self._start[1]) * world_size * batch_size
        checkpoint.setdefault('meta', {}).update(batch_record(world_size, batch_size, counts, samples))

    def _check_batch(self, runner, checkpoint: dict, path: str) -> None:
        meta = checkpoint.setdefault('meta', {})
        if getattr(runner.train_loop, 'dataloader', None) is None:
            return  # resumed outside training (no train loop): nothing to compare
        world_size, batch_size, counts = self._batch_now(runner)
        ratio = check_batch(meta, world_size, batch_size, counts, path, self.schedule_in_samples)
        if 'world_size' not in meta:
            runner.logger.warning(
                f'resuming from {path}: it does not record the processes and batch it was trained with (written '
                f'before beit_mm recorded them); resumed as it is. Check that processes x batch x accumulation '
                f'({world_size} x {batch_size} x {counts}) are those it was trained with')
            self._start = (0, 0)  # images seen before are unknown
            return
        seen = meta.get('samples_seen', meta['iter'] * meta['world_size'] * meta['batch_size'])
        if ratio is not None:
            before = meta['iter']
            after = rescale_iterations(checkpoint, ratio)
            loop = runner.train_loop
            if isinstance(loop, IterBasedTrainLoop):
                loop._max_iters = int(round(loop._max_iters * ratio))
            runner.logger.warning(
                f'resuming from {path}: {meta["world_size"]} x {meta["batch_size"]} images per iteration then, '
                f'{world_size} x {batch_size} now: iteration {before} -> {after} (max_iters {runner.max_iters}), '
                f'the schedule continues counted in images seen ({seen} so far)')
        self._start = (seen, meta['iter'])

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        # MMEngine 0.10.7 keeps whether it resumes, and from which file, in these two attributes (Runner.__init__);
        # without load_from it resumes from find_latest_checkpoint(work_dir) (Runner.load_or_resume).
        # MMEngine's FlexibleRunner may keep the path in _resume itself.
        if not runner._resume:
            return
        path = runner._resume if isinstance(runner._resume, str) else (
            runner._load_from or find_latest_checkpoint(runner.work_dir))
        dropped = validate_runtime_state(checkpoint, str(path), runner.work_dir, runner.max_iters, runner.max_epochs,
                                         same_run(path, runner.work_dir))
        # FlexibleRunner's strategies (FSDP, DeepSpeed) load optimizer state of their own layout (parameters by
        # name, sharded): theirs to check. Runner.resume builds the wrapper next; built, it is returned as it is.
        if 'optimizer' in checkpoint and hasattr(runner, 'build_optim_wrapper'):
            runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
            dropped += check_optimizer_state(runner.optim_wrapper, checkpoint['optimizer'], str(path))
        self._check_batch(runner, checkpoint, str(path))
        if dropped:
            runner.logger.warning(f'resuming from {path}: dropped {"; ".join(dropped)}. A resumed checkpoint steers '
                                  f'no file but the checkpoints of its own work dir ({runner.work_dir})')


def use_checkpoint_guard_hook(cfg: Config, schedule_in_samples: bool = False) -> None:
    """Add ``beit_mm.CheckpointGuardHook`` to ``cfg.custom_hooks`` unless there (what ``tools/train.py`` does for every
    config); ``schedule_in_samples`` (``--resume-schedule-in-samples``) is set on it either way."""
    hooks = [dict(h) for h in cfg.get('custom_hooks') or []]
    guards = [h for h in hooks if str(h.get('type', '')).split('.')[-1] == 'CheckpointGuardHook']
    if not guards:
        guards = [dict(type='beit_mm.CheckpointGuardHook')]
        hooks.append(guards[0])
    if schedule_in_samples:
        guards[0]['schedule_in_samples'] = True
    cfg.custom_hooks = hooks
