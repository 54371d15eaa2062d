"""A resumed checkpoint's training state is checked before MMEngine acts on it (:mod:`beit_mm.fileio.training_state`).

MMEngine 0.10.7's ``Runner.resume`` calls ``load_checkpoint``, whose first step after opening the file is
``call_hook('after_load_checkpoint', checkpoint=...)``; only then does it load the weights, set the loop's
``_iter``/``_epoch`` from ``meta``, re-seed from ``meta.seed``, load the message hub (which ``CheckpointHook`` reads
in ``before_train``) and the optimizer state. :class:`CheckpointGuardHook` runs there, first of all hooks
(``HIGHEST``; ``RNGStateHook`` keeps the generator states in the same call), and checks and cleans the checkpoint in
place: counters within this run's schedule, a seed numpy accepts, generator states the generators accept, file-naming
runtime values only for this work dir's own checkpoints, optimizer state of the parameters' shapes and dtypes. A
refusal is a :class:`~beit_mm.fileio.training_state.TrainingStateError`, which ``tools/train.py`` prints as one line.

A ``load_from`` start (no resume) uses only the weights: nothing is checked then. Under MMEngine's ``FlexibleRunner``
(FSDP, DeepSpeed) the optimizer state has the strategy's layout and is left to it; the rest is checked.
"""
from __future__ import annotations

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner.checkpoint import find_latest_checkpoint

from beit_mm.fileio.training_state import check_optimizer_state, same_run, validate_runtime_state
from beit_mm.registry import HOOKS


@HOOKS.register_module()
class CheckpointGuardHook(Hook):
    """Check a resumed checkpoint's training state in place before ``Runner.resume`` uses it (module docstring).

    ``tools/train.py`` adds it to every config (:func:`use_checkpoint_guard_hook`); elsewhere:
    ``custom_hooks = [dict(type='beit_mm.CheckpointGuardHook')]``.
    """

    priority = 'HIGHEST'  # before RNGStateHook and every other after_load_checkpoint

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
        if dropped:
            runner.logger.warning(f'resuming from {path}: dropped {"; ".join(dropped)}. A resumed checkpoint steers '
                                  f'no file but the checkpoints of its own work dir ({runner.work_dir})')


def use_checkpoint_guard_hook(cfg: Config) -> None:
    """Add ``beit_mm.CheckpointGuardHook`` to ``cfg.custom_hooks`` unless there (what ``tools/train.py`` does for every
    config)."""
    hooks = list(cfg.get('custom_hooks') or [])
    if not any(str(h.get('type', '')).split('.')[-1] == 'CheckpointGuardHook' for h in hooks):
        hooks.append(dict(type='beit_mm.CheckpointGuardHook'))
    cfg.custom_hooks = hooks
