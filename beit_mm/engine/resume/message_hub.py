"""The message hub a resumed run reloads: only the runtime values ``CheckpointHook`` reads, naming only this work
dir's own checkpoints; log scalars rebuilt from finite histories."""
from __future__ import annotations

import os.path as osp

import numpy as np
from mmengine.logging import HistoryBuffer

from beit_mm.fileio.paths import inside
from beit_mm.fileio.work_dir import recorded_file

from .fields import (MAX_LOG_HISTORY, MAX_SCORE, MESSAGE_HUB_FIELDS, RUNTIME_INFO_REWRITTEN,
                     RUNTIME_INFO_REWRITTEN_PREFIXES, _bounded_int, _is_real, _keep_only, _refuse)


def _own_checkpoint_file(path, work_dir: str, prefix: str) -> bool:
    """Whether ``path`` is a regular ``<prefix>*.pth`` file directly inside ``work_dir``."""
    if not isinstance(path, str) or not path or '://' in path or '\0' in path:
        return False
    name = osp.basename(path)
    return (osp.realpath(osp.dirname(osp.abspath(path))) == osp.realpath(work_dir) and name.startswith(prefix)
            and name.endswith('.pth') and osp.isfile(path) and not osp.islink(path))


def _check_score(source: str, key: str, value) -> None:
    if not (_is_real(value) and abs(value) <= MAX_SCORE):
        raise _refuse(source, f'message_hub.runtime_info.{key}', value, 'CheckpointHook compares every validation '
                      f'score with it: it must be a finite number of magnitude <= {MAX_SCORE:g}',
                      'resume from a checkpoint tools/train.py wrote, or remove the key from the checkpoint '
                      '(the next validation then sets the best score)')


def clean_runtime_info(runtime_info: dict, source: str, work_dir: str, same_run: bool, last_step: int) -> list[str]:
    """Keep, in place, only the runtime values a resumed run's hooks read, each valid; returns what was dropped.

    Checkpoint names and ``keep_ckpt_ids`` are kept only for ``same_run`` and this work dir's own files, so a
    checkpoint from elsewhere steers no file.

    Raises:
        TrainingStateError: a best score that is not a finite number of bounded size.
    """
    dropped = []
    for key in list(runtime_info):
        value = runtime_info[key]
        if not isinstance(key, str):
            keep, why = False, 'not a name'
        elif key in ('best_ckpt', 'last_ckpt') or key.startswith('best_ckpt_'):
            keep = same_run and _own_checkpoint_file(value, work_dir, 'best_' if key.startswith('best') else '')
            why = 'names no checkpoint file of this work dir\'s own'
        elif key == 'keep_ckpt_ids':
            keep = (same_run and isinstance(value, list) and len(set(value)) == len(value)
                    and all(_bounded_int(step, 0, last_step) for step in value))
            why = 'not this work dir\'s own checkpoints'
        elif key == 'best_score' or key.startswith('best_score_'):
            _check_score(source, key, value)
            continue
        elif key in RUNTIME_INFO_REWRITTEN or key.startswith(RUNTIME_INFO_REWRITTEN_PREFIXES):
            del runtime_info[key]
            continue
        else:
            keep, why = False, 'nothing reads it'
        if not keep:
            del runtime_info[key]
            dropped.append(f'message_hub.runtime_info.{key} ({why})')
    return dropped


def _clean_log_scalars(log_scalars: dict, dropped: list) -> None:
    """Rebuild, in place, every ``HistoryBuffer`` from finite, bounded histories; drop anything else."""
    for key in list(log_scalars):
        value = log_scalars[key]
        history = getattr(value, '_log_history', None) if isinstance(value, HistoryBuffer) else None
        counts = getattr(value, '_count_history', None) if isinstance(value, HistoryBuffer) else None
        ok = (isinstance(key, str) and isinstance(history, np.ndarray) and isinstance(counts, np.ndarray)
              and history.ndim == counts.ndim == 1 and history.shape == counts.shape
              and history.size <= MAX_LOG_HISTORY and history.dtype.kind in 'iuf' and counts.dtype.kind in 'iu'
              and bool(np.isfinite(history).all()) and bool((counts >= 0).all()))
        if ok:
            log_scalars[key] = HistoryBuffer(history.tolist(), counts.tolist(), MAX_LOG_HISTORY)
        else:
            del log_scalars[key]
            dropped.append(f'message_hub.log_scalars.{key} (not a history of finite numbers)')


def clean_message_hub(hub, source: str, work_dir: str, same_run: bool, last_step: int) -> list[str]:
    """Clean ``checkpoint['message_hub']`` in place; returns what was dropped."""
    if not (isinstance(hub, dict) and all(isinstance(hub.get(k), dict) for k in MESSAGE_HUB_FIELDS)):
        raise _refuse(source, 'message_hub', hub, 'expected MessageHub.state_dict(): a dict of the dicts '
                      'log_scalars, runtime_info and resumed_keys', 'resume from a checkpoint tools/train.py wrote')
    dropped = []
    _keep_only(hub, MESSAGE_HUB_FIELDS, 'message_hub.', dropped)
    dropped += clean_runtime_info(hub['runtime_info'], source, work_dir, same_run, last_step)
    _clean_log_scalars(hub['log_scalars'], dropped)
    kept = set(hub['runtime_info']) | set(hub['log_scalars'])
    hub['resumed_keys'] = {k: v for k, v in hub['resumed_keys'].items() if k in kept and isinstance(v, bool)}
    return dropped


def same_run(checkpoint_path: str | None, work_dir: str) -> bool:
    """Whether the checkpoint lies in ``work_dir`` and its folder's manifest lists it with its present content."""
    if not checkpoint_path or '://' in str(checkpoint_path):
        return False
    return (inside(checkpoint_path, work_dir) and osp.realpath(checkpoint_path) != osp.realpath(work_dir)
            and recorded_file(osp.dirname(osp.abspath(checkpoint_path)), osp.basename(checkpoint_path)))
