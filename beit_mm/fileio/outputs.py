"""Writing outputs without losing anything: destinations checked at start, files and folders replaced atomically.

- :func:`check_output`: before any work, a destination that exists is refused unless the user passed
  ``--overwrite``; a file destination that is a folder (or the reverse), a parent that is a file or not writable,
  are named errors.
- :func:`atomic_file` / :func:`atomic_dir`: the body writes into a temporary name in the destination's own folder
  (``.<name>.<pid>.part``); when it returns, the data is flushed to disk (fsync) and renamed over the final name. A
  kill or a full disk at any moment leaves the old file (or folder), the complete new one, or nothing under the final
  name (plus, after a kill, a ``.part`` leftover with this process's id), never a partial file.
"""
from __future__ import annotations

import contextlib
import errno
import os
import os.path as osp
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Callable

from mmengine.fileio import LocalBackend


class OutputError(OSError):
    """A destination that cannot or must not be written; the message names it, the problem and the fix."""


def check_output(path: str, overwrite: bool = False, kind: str = 'file', flag: str = '--overwrite') -> None:
    """Raise :class:`OutputError` unless ``path`` can be written as a new ``kind`` (``'file'`` or ``'dir'``).

    Args:
        path: the destination.
        overwrite: whether the user allowed replacing an existing ``path``.
        kind: what will be written there.
        flag: the option that allows replacing, named in the message.
    """
    if osp.isdir(path) and kind == 'file':
        raise OutputError(f'output {path} is a folder; the output is a file. Fix: give a file name, e.g. '
                          f'{osp.join(path, "model" + (osp.splitext(path)[1] or ".pth"))}')
    if osp.exists(path) and kind == 'dir' and not osp.isdir(path):
        raise OutputError(f'output {path} is a file; the output is a folder. Fix: give a folder name')
    if osp.lexists(path) and not overwrite:
        raise OutputError(f'output {path} exists; nothing was written. Fix: pass {flag} to replace it, or choose '
                          'another path')
    if kind == 'dir' and osp.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(f'cannot write into folder {path}: not writable by this user. Fix: choose a writable '
                          'folder or change its permissions')
    parent = osp.dirname(osp.abspath(path))
    while not osp.exists(parent):
        parent = osp.dirname(parent)
    if not osp.isdir(parent):
        raise OutputError(f'cannot write {path}: {parent} is a file, not a folder. Fix: choose another path')
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f'cannot write {path}: folder {parent} is not writable by this user. Fix: choose a '
                          'writable path or change the folder\'s permissions')


def _temporary_name(path: str) -> str:
    folder, name = osp.split(osp.abspath(path))
    return osp.join(folder, f'.{name}.{os.getpid()}.part')


def _fsync_path(path: str) -> None:
    """fsync a file, or every file in a folder tree and the folders themselves."""
    paths = [path]
    if osp.isdir(path):
        paths = [osp.join(root, name) for root, dirs, files in os.walk(path) for name in files + dirs] + [path]
    for item in paths:
        fd = os.open(item, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _named_write_error(error: OSError, path: str) -> OSError:
    if error.errno == errno.ENOSPC:
        return OutputError(f'the disk is full writing {path}; nothing was written under that name. Fix: free space '
                           'on that disk or choose another path')
    if error.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        return OutputError(f'cannot write {path} ({error.strerror}). Fix: choose a writable path')
    return error


@contextlib.contextmanager
def _removed_on_error(tmp: str, path: str) -> Iterator[None]:
    """Remove ``tmp`` when the body fails; an ``OSError`` becomes a named :class:`OutputError` where it can."""
    try:
        yield
    except OSError as error:
        _remove(tmp)
        raise _named_write_error(error, path) from error
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: str, tmp: str | None = None) -> Iterator[str]:
    """Yield a temporary path next to ``path`` (``tmp``, default ``.<name>.<pid>.part``); write the file there. On
    success it is fsync'ed and renamed to ``path`` (replacing an old file in one step); on any error the temporary
    file is removed and ``path`` is untouched."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = tmp or _temporary_name(path)
    with _removed_on_error(tmp, path):
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, path)
        _fsync_path(folder)


@contextlib.contextmanager
def atomic_dir(path: str) -> Iterator[str]:
    """:func:`atomic_file` for a folder: yield a new temporary folder next to ``path``; on success it replaces
    ``path`` (an old folder is renamed aside, the new one renamed in, then the old one removed: a kill between the
    two renames leaves nothing under ``path`` and the old folder as ``.<name>.<pid>.old``)."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = _temporary_name(path)
    os.makedirs(tmp)
    with _removed_on_error(tmp, path):
        yield tmp
        _fsync_path(tmp)
        old = None
        if osp.lexists(path):
            old = tmp[:-len('.part')] + '.old'
            os.replace(path, old)
        os.replace(tmp, path)
        _fsync_path(folder)
        if old is not None:
            _remove(old)


def _remove(path: str) -> None:
    if osp.isdir(path) and not osp.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif osp.lexists(path):
        os.remove(path)


# A file being written is first ``<name>.part`` (never matched by ``*.pth`` globs) and becomes ``<name>`` by
# ``os.replace`` once all bytes are flushed and fsync'ed, so ``<name>`` is either absent or complete. A process killed
# mid-write leaves only a ``.part`` file, which ``beit_mm.AtomicCheckpointHook`` deletes at the next start.
PARTIAL_SUFFIX = '.part'
ATOMIC_BACKEND = 'beit_mm_atomic_local'


def atomic_write_bytes(data: bytes, path: str, write: Callable[[BinaryIO, bytes], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically through ``path.part`` (:func:`atomic_file`: flush
    + fsync, ``os.replace``, fsync the folder).

    Args:
        data: the file content.
        path: destination (its folder is created).
        write: ``write(file, data)`` writes the bytes into the open temporary file (default ``file.write``).
    """
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
