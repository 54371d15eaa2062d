"""MMEngine's ``CheckpointHook`` with crash-safe saving: a kill at any moment leaves the previous checkpoint usable.

Per save: write ``<name>.beit_mm.part`` (``PARTIAL_SUFFIX``, a name only this library gives), fsync and rename,
record it with its sha256 in the folder's manifest, point ``last_checkpoint`` at it, and only then delete checkpoints
beyond ``max_keep_ckpts`` that the manifest lists with their present content. ``before_train`` deletes the leftovers of
its own names only (``iter_<n>.pth.beit_mm.part``, ``best_*``, ``last_checkpoint.beit_mm.part``): another program's
``iter_<n>.pth.part`` (a browser's partial download of a checkpoint) stays. Remote storage keeps its backend.
"""
from __future__ import annotations

import os
import os.path as osp
import re
import string

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS as MMENGINE_HOOKS

from beit_mm.registry import HOOKS, config_class, config_type_is

from ...fileio.names import shown
from ...fileio.outputs import ATOMIC_BACKEND, PARTIAL_SUFFIX, AtomicLocalBackend, atomic_write_bytes
from ...fileio.work_dir import record_written, recorded_file


def checkpoint_name_pattern(filename_tmpl: str) -> str:
    """A regex of the names ``filename_tmpl`` gives (``'iter_{}.pth'`` -> ``iter_\\d+\\.pth``)."""
    parts = string.Formatter().parse(filename_tmpl)
    return ''.join(re.escape(literal) + (r'\d+' if field is not None else '') for literal, field, _, _ in parts)


def own_partial_files(out_dir: str, work_dir: str, filename_tmpl: str) -> list[str]:
    """The unfinished writes of :class:`AtomicCheckpointHook` (periodic, best, last_checkpoint) on disk: the names
    ``filename_tmpl`` gives, ending in :data:`~beit_mm.fileio.outputs.PARTIAL_SUFFIX`; plain ``.part`` names are
    other programs'."""
    own = re.compile(rf'(?:best_.+_)?{checkpoint_name_pattern(filename_tmpl)}{re.escape(PARTIAL_SUFFIX)}')
    names = sorted(os.listdir(out_dir)) if osp.isdir(out_dir) else []
    found = [osp.join(out_dir, name) for name in names if own.fullmatch(name)]
    found.append(osp.join(work_dir, 'last_checkpoint' + PARTIAL_SUFFIX))
    return [path for path in dict.fromkeys(found) if osp.isfile(path) and not osp.islink(path)]


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """``CheckpointHook`` (same arguments) whose saves survive SIGKILL at any point."""

    def __init__(self, *args, **kwargs) -> None:
        out_dir = kwargs.get('out_dir')
        local = out_dir is None or '://' not in str(out_dir)
        if local and kwargs.get('backend_args') is None and kwargs.get('file_client_args') is None:
            kwargs['backend_args'] = dict(backend=ATOMIC_BACKEND)
        super().__init__(*args, **kwargs)

    @property
    def _local(self) -> bool:
        """Whether checkpoints go through beit_mm's atomic local backend (or one built on it): files of a local
        folder, listed in its manifest."""
        return isinstance(getattr(self, 'file_backend', None), AtomicLocalBackend)

    def _save_best_checkpoint(self, runner, metrics) -> None:
        super()._save_best_checkpoint(runner, metrics)
        if self._local and is_main_process():
            for path in [getattr(self, 'best_ckpt_path', None), *getattr(self, 'best_ckpt_path_dict', {}).values()]:
                if path and osp.dirname(str(path)) == str(self.out_dir):
                    record_written(str(self.out_dir), osp.basename(str(path)))

    def before_train(self, runner) -> None:
        super().before_train(runner)
        if not is_main_process():
            return
        for leftover in own_partial_files(str(self.out_dir), runner.work_dir, self.filename_tmpl):
            os.remove(leftover)
            runner.logger.warning(f'removed {shown(leftover)}: an unfinished checkpoint write of a killed run')

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
        if self._local:
            record_written(str(self.out_dir), ckpt_filename)
        for old_step in to_delete:
            path = self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(old_step))
            if self._local and osp.lexists(path) and not recorded_file(str(self.out_dir), osp.basename(path)):
                runner.logger.warning(f'{shown(path)} is not removed: the manifest of {shown(str(self.out_dir))} does '
                                      'not list it with its present content, so no run of this work dir wrote it')
                continue
            if self.file_backend.isfile(path):
                self.file_backend.remove(path)
            elif self.file_backend.isdir(path):  # checkpoints saved by DeepSpeed are folders
                self.file_backend.rmtree(path)


def hook_class(cfg, hook: dict) -> type | None:
    """The class a hook config builds, looked up as the Runner does, or None."""
    return config_class(hook.get('type'), MMENGINE_HOOKS, cfg.get('default_scope'))


def is_hook(cfg, hook: dict, cls: type) -> bool:
    """Whether the hook config ``hook`` builds a ``cls`` (or a subclass): asked of the class, not of its name."""
    return config_type_is(hook.get('type'), cls, MMENGINE_HOOKS, cfg.get('default_scope'))


def ensure_custom_hook(cfg, cls: type, type_name: str, **settings) -> None:
    """Make ``cfg.custom_hooks`` hold a hook that builds ``cls`` (else append ``dict(type=type_name)``); set
    ``settings`` on it."""
    hooks = [dict(h) for h in cfg.get('custom_hooks') or []]
    found = [h for h in hooks if is_hook(cfg, h, cls)]
    if not found:
        found = [dict(type=type_name)]
        hooks.append(found[0])
    found[0].update(settings)
    cfg.custom_hooks = hooks


def use_atomic_checkpoint_hook(cfg) -> None:
    """Replace MMEngine's ``CheckpointHook`` (any spelling, not a subclass) in ``cfg.default_hooks.checkpoint`` by
    ``beit_mm.AtomicCheckpointHook`` with the same arguments."""
    hook = cfg.get('default_hooks', {}).get('checkpoint')
    if hook is None:
        return
    if hook_class(cfg, hook) is CheckpointHook:
        hook['type'] = 'beit_mm.AtomicCheckpointHook'
