"""The work dir of a new training run: refused while it holds another run's checkpoints (``tools/train.py``).

A new run (no ``--resume``) saves under the same names as any earlier run in its work dir (``iter_N.pth``,
``epoch_N.pth``, ``best_<metric>_iter_N.pth``), repoints ``last_checkpoint`` and deletes checkpoints beyond
``max_keep_ckpts``, so it would overwrite the earlier run's checkpoints one by one. :func:`check_new_run_work_dir`
stops it before anything is built, unless the run resumes (``--resume``) or the user asks to start again over the
earlier run (``--overwrite``).
"""
from __future__ import annotations

import fnmatch
import os
import os.path as osp

#: What an earlier run of ``tools/train.py`` leaves in its work dir (MMEngine's ``CheckpointHook`` names).
CHECKPOINT_PATTERNS = ('iter_*.pth', 'epoch_*.pth', 'best_*.pth', 'last_checkpoint')


class WorkDirInUseError(RuntimeError):
    """A new run was pointed at a work dir holding another run's checkpoints; the message names them and the fix."""


def earlier_checkpoints(work_dir: str) -> list[str]:
    """Names of the entries of ``work_dir`` that :data:`CHECKPOINT_PATTERNS` match, newest first (modification
    time); checkpoint files before ``last_checkpoint``, the pointer. Empty when ``work_dir`` does not exist."""
    if not osp.isdir(work_dir):
        return []
    names = [n for n in os.listdir(work_dir) if any(fnmatch.fnmatchcase(n, p) for p in CHECKPOINT_PATTERNS)]
    return sorted(names, key=lambda n: (n == 'last_checkpoint', -os.stat(osp.join(work_dir, n)).st_mtime_ns, n))


def check_new_run_work_dir(work_dir: str, resume: str | None, overwrite: bool) -> None:
    """Refuse a new run (``resume`` None, not ``overwrite``) in a work dir that holds an earlier run's checkpoints.

    Args:
        work_dir: the run's work dir (``cfg.work_dir``), which may not exist yet.
        resume: ``tools/train.py --resume``'s value: None for a new run, ``'auto'`` or a checkpoint path to resume.
        overwrite: ``--overwrite``: start a new run there anyway; its saves overwrite the earlier run's files.

    Raises:
        WorkDirInUseError: naming the work dir, its newest checkpoint and the three ways out.
    """
    if resume is not None or overwrite:
        return
    found = earlier_checkpoints(work_dir)
    if found:
        raise WorkDirInUseError(
            f'{work_dir} holds checkpoints of an earlier run (newest: {found[0]}, {len(found)} found): a new run '
            'there would overwrite them as it saves. Fix: --resume to continue that run, --overwrite to start again '
            'over it, or --work-dir with a new folder.')
