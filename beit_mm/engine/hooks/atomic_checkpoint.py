"""MMEngine's ``CheckpointHook`` with crash-safe saving: a kill at any moment leaves the previous checkpoint usable.

``mmengine.hooks.CheckpointHook`` (0.10.7, ``_save_checkpoint_with_step``) deletes the oldest checkpoint *before*
writing the new one, writes the file in place (a kill mid-write leaves a truncated ``iter_N.pth``) and rewrites
``last_checkpoint`` in place. This subclass, per periodic save:

1. writes ``iter_N.pth`` through :class:`beit_mm.engine.checkpoint.AtomicLocalBackend` (``iter_N.pth.part``, fsync,
   rename), also for the best checkpoint;
2. then points ``last_checkpoint`` at it (atomically);
3. only then deletes checkpoints beyond ``max_keep_ckpts``.

The checkpoint *content* is unchanged (``keep_ckpt_ids`` and ``last_ckpt`` in the message hub are updated before the
save, as upstream). ``before_train`` deletes ``*.part`` leftovers of a killed run. Used for every config by
``tools/train.py`` (:func:`beit_mm.engine.checkpoint.use_atomic_checkpoint_hook`); writes to remote storage
(``out_dir`` with a ``://`` prefix or explicit ``backend_args``) keep the given backend.
"""
from __future__ import annotations

import glob
import os
import os.path as osp

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook

from beit_mm.registry import HOOKS

from ..checkpoint import ATOMIC_BACKEND, PARTIAL_SUFFIX, atomic_write_bytes


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """``CheckpointHook`` (same arguments) whose saves survive SIGKILL at any point; see the module docstring."""

    def __init__(self, *args, **kwargs) -> None:
        out_dir = kwargs.get('out_dir')
        local = out_dir is None or '://' not in str(out_dir)
        if local and kwargs.get('backend_args') is None and kwargs.get('file_client_args') is None:
            kwargs['backend_args'] = dict(backend=ATOMIC_BACKEND)
        super().__init__(*args, **kwargs)

    def before_train(self, runner) -> None:
        super().before_train(runner)
        if is_main_process() and osp.isdir(str(self.out_dir)):
            for leftover in glob.glob(osp.join(str(self.out_dir), '*' + PARTIAL_SUFFIX)):
                os.remove(leftover)
                runner.logger.warning(f'removed {leftover}: an unfinished checkpoint write of a killed run')

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        to_delete = []
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
            while len(self.keep_ckpt_ids) >= self.max_keep_ckpts:
                to_delete.append(self.keep_ckpt_ids.popleft())
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))

        ckpt_filename = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, ckpt_filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        runner.save_checkpoint(
            self.out_dir,
            ckpt_filename,
            self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args)
        if not is_main_process():
            return
        atomic_write_bytes(str(self.last_ckpt).encode(), osp.join(runner.work_dir, 'last_checkpoint'))
        for old_step in to_delete:
            path = self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(old_step))
            if self.file_backend.isfile(path):
                self.file_backend.remove(path)
            elif self.file_backend.isdir(path):  # checkpoints saved by DeepSpeed are folders
                self.file_backend.rmtree(path)
