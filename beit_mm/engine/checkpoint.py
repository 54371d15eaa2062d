"""MMEngine checkpoints: safe loading on torch >= 2.6, atomic saving, and finding the last complete one.

Saving (second half of this module): :class:`AtomicLocalBackend` writes every checkpoint as ``<name>.part`` and
renames it when complete; ``beit_mm.AtomicCheckpointHook`` uses it, writes ``last_checkpoint`` only after the file is
complete (also atomically), deletes old checkpoints only after that, and removes ``.part`` leftovers of a killed run;
:func:`find_last_complete_checkpoint` is what ``tools/train.py --resume`` resumes from.

Loading:

torch >= 2.6 loads with ``weights_only=True`` by default, and MMEngine 0.10.7 calls ``torch.load`` without that
argument, so ``--resume`` and ``load_from`` of MMEngine's own checkpoints fail with
``UnpicklingError: Weights only load failed ... HistoryBuffer``. Instead of turning safe loading off, this module
allow-lists exactly the non-tensor objects that ``Runner.save_checkpoint`` writes (found by loading a real runner
checkpoint with ``weights_only=True`` until it passed; ``tests/test_tools.py`` checks each one is needed):

- ``message_hub.log_scalars`` holds :class:`mmengine.logging.HistoryBuffer` objects, whose ``_log_history`` and
  ``_count_history`` are numpy arrays, with numpy scalars in their state: ``numpy.core.multiarray._reconstruct``,
  ``numpy.core.multiarray.scalar`` (``numpy._core`` on numpy 2), ``numpy.ndarray``, ``numpy.dtype`` and the dtype
  classes ``numpy.dtypes.Float64DType``/``Int64DType`` (all numeric dtype classes are allowed: a message hub may log
  other dtypes);
- ``HistoryBuffer.__getstate__`` stores its statistics methods by reference, pickled as
  ``getattr(HistoryBuffer, 'mean')``. ``builtins.getattr`` itself is NOT allowed: the name is bound to
  :func:`history_buffer_statistic`, which resolves only those methods and refuses everything else.

Everything else in such a checkpoint (tensors, ``OrderedDict``, dicts, lists, tuples, str, numbers) is already allowed
by torch. Any other pickled class or function is still refused by ``torch.load``.
"""
from __future__ import annotations

import logging
import os
import os.path as osp
import pickle
import re
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np
import torch
from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import HistoryBuffer, print_log

# numpy dtypes whose arrays MMEngine's message hub can hold (logged losses, counts, lrs, times).
_NUMPY_DTYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                 np.float16, np.float32, np.float64)
# HistoryBuffer._set_default_statistics registers these; custom ones are added by HistoryBuffer.register_statistics.
_DEFAULT_STATISTICS = ('min', 'max', 'current', 'mean')
# numpy's pickling constructors of arrays and scalars (under numpy.core on numpy 1, numpy._core on numpy 2)
_NDARRAY_RECONSTRUCT = np.ndarray(0).__reduce__()[0]
_NUMPY_SCALAR = np.float64(0).__reduce__()[0]


def history_buffer_statistic(owner: type, name: str) -> Callable:
    """``getattr`` as the weights-only unpickler sees it: returns ``HistoryBuffer.<name>`` for a registered statistics
    method and raises for any other owner or name.

    Raises:
        pickle.UnpicklingError: for anything but a HistoryBuffer statistics method.
    """
    if owner is HistoryBuffer and (name in _DEFAULT_STATISTICS or name in HistoryBuffer._statistics_methods):
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f'weights_only loading refuses getattr({owner!r}, {name!r}): beit_mm allows getattr only for '
        f'HistoryBuffer statistics methods ({", ".join(_DEFAULT_STATISTICS)}). Load only trusted files with '
        'weights_only=False.')


def checkpoint_safe_globals() -> list:
    """The objects that ``torch.load(..., weights_only=True)`` must accept to read an MMEngine runner checkpoint.

    Returns:
        list: classes/functions, and ``(function, 'builtins.getattr')`` for the restricted ``getattr``, for
        ``torch.serialization.add_safe_globals``.
    """
    return [
        HistoryBuffer,
        (history_buffer_statistic, 'builtins.getattr'),
        *((func, f'{module}.multiarray.{name}') for module in ('numpy.core', 'numpy._core')
          for func, name in ((_NDARRAY_RECONSTRUCT, '_reconstruct'), (_NUMPY_SCALAR, 'scalar'))),
        np.ndarray,
        np.dtype,
        *(type(np.dtype(t)) for t in _NUMPY_DTYPES),
    ]


def register_checkpoint_safe_globals() -> None:
    """Allow-list MMEngine's checkpoint types for ``weights_only`` loading (idempotent; runs on ``import beit_mm``).

    After this, ``Runner.resume``/``load_from`` and ``mmengine.runner.load_checkpoint`` read checkpoints written by
    an MMEngine runner, while arbitrary pickled objects are still refused.
    """
    torch.serialization.add_safe_globals(checkpoint_safe_globals())


register_checkpoint_safe_globals()


# ---------------------------------------------------------------------------------------------------------------
# Atomic saving and finding the last complete checkpoint
# ---------------------------------------------------------------------------------------------------------------
# A file being written is first ``<name>.part`` (never matched by ``*.pth`` globs) and becomes ``<name>`` by
# ``os.replace`` once all bytes are flushed and fsync'ed, so ``<name>`` is either absent or complete. A process killed
# mid-write leaves only a ``.part`` file, which ``beit_mm.AtomicCheckpointHook`` deletes at the next start.
PARTIAL_SUFFIX = '.part'
ATOMIC_BACKEND = 'beit_mm_atomic_local'
_CHECKPOINT_NAME = re.compile(r'^(?:iter|epoch)_(\d+)\.pth$')


def atomic_write_bytes(data: bytes, path: str, write: Callable[[BinaryIO, bytes], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically through ``path.part`` (:func:`beit_mm.apis.outputs.atomic_file`: flush
    + fsync, ``os.replace``, fsync the folder).

    Args:
        data: the file content.
        path: destination (its folder is created).
        write: ``write(file, data)`` writes the bytes into the open temporary file (default ``file.write``).
    """
    from ..apis.outputs import atomic_file
    with atomic_file(path, tmp=path + PARTIAL_SUFFIX) as tmp, open(tmp, 'wb') as f:
        (write or _write_all)(f, data)


def _write_all(f: BinaryIO, data: bytes) -> None:
    f.write(data)


class AtomicLocalBackend(LocalBackend):
    """MMEngine's ``LocalBackend`` whose ``put``/``put_text`` write atomically (:func:`atomic_write_bytes`).

    Registered as ``'beit_mm_atomic_local'``: ``CheckpointHook(backend_args=dict(backend='beit_mm_atomic_local'))``
    makes every checkpoint (periodic and best) go through it, because the hook passes its ``backend_args`` to
    ``Runner.save_checkpoint`` -> ``mmengine.runner.save_checkpoint`` -> ``backend.put``.
    """

    def write_temp(self, f: BinaryIO, data: bytes) -> None:
        """Write the bytes of one file into its open temporary file (a seam for tests that kill mid-write)."""
        f.write(data)

    def put(self, obj: bytes, filepath: str | Path) -> None:
        atomic_write_bytes(obj, str(filepath), write=lambda f, data: self.write_temp(f, data))

    def put_text(self, obj: str, filepath: str | Path, encoding: str = 'utf-8') -> None:
        self.put(obj.encode(encoding), filepath)


register_backend(ATOMIC_BACKEND, AtomicLocalBackend, force=True)


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a whole ``torch.save`` file: a zip archive with its central directory whose every tensor
    record is present (``torch.load(mmap=True, weights_only=True)``: the records are located, no tensor data is read,
    no code is run). A write interrupted by an exception (Ctrl-C) inside ``torch.save`` still closes the archive and
    leaves ``data.pkl``, but lacks the records it did not reach: refused here."""
    if not osp.isfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            if not any(name.endswith('data.pkl') for name in archive.namelist()):
                return False
        torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  (BadZipFile, a missing record, an unreadable pickle: not complete)
        return False
    return True


def find_last_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint to resume from: ``work_dir/last_checkpoint`` when it names a complete file, else the complete
    ``iter_N.pth``/``epoch_N.pth`` in ``work_dir`` with the largest N (a warning says why); None when there is none.
    """
    pointer = osp.join(work_dir, 'last_checkpoint')
    named = None
    if osp.isfile(pointer):
        with open(pointer) as f:
            named = f.read().strip() or None
        if named is not None and is_complete_checkpoint(named):
            return named
    candidates = []
    for name in os.listdir(work_dir) if osp.isdir(work_dir) else []:
        match = _CHECKPOINT_NAME.match(name)
        if match:
            candidates.append((int(match.group(1)), osp.join(work_dir, name)))
    for _, path in sorted(candidates, reverse=True):
        if is_complete_checkpoint(path):
            if named is not None:
                print_log(f'{pointer} names {named}, which is missing or incomplete; resuming from {path}, the newest '
                          'complete checkpoint', logger='current', level=logging.WARNING)
            return path
    if named is not None:
        print_log(f'{pointer} names {named}, which is missing or incomplete, and {work_dir} holds no other complete '
                  'checkpoint', logger='current', level=logging.WARNING)
    return None


def use_atomic_checkpoint_hook(cfg) -> None:
    """Replace MMEngine's ``CheckpointHook`` in ``cfg.default_hooks.checkpoint`` by ``beit_mm.AtomicCheckpointHook``
    (same arguments; what ``tools/train.py`` does for every config). Other checkpoint hook types are kept."""
    hook = cfg.get('default_hooks', {}).get('checkpoint')
    if hook is not None and hook.get('type') in ('CheckpointHook', 'mmengine.CheckpointHook'):
        hook['type'] = 'beit_mm.AtomicCheckpointHook'
