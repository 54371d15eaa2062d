"""Writing outputs without losing anything: destinations checked before any work, files and folders replaced
atomically. Every writer of beit_mm (tools and analysis scripts included) goes through here.

- :func:`check_output`: before any work, a destination is refused (:class:`OutputError`, naming the path, the problem
  and the fix) when it
  - is a symbolic link: an output never goes through a link onto the file it points to;
  - is, lies inside, or (a folder) holds one of the tool's ``inputs`` (its images, checkpoint, config, data roots),
    links resolved;
  - lies inside a dataset root: one of ``inputs``, or, as a backstop, any folder laid out as one
    (:mod:`beit_mm.fileio.dataset_roots`);
  - exists, unless the user passed ``--overwrite`` (an output folder: it holds files, see ``kind='folder'``);
  - is a folder where a file goes (or the reverse), or lies under a file or an unwritable folder.
- :func:`atomic_file` / :func:`atomic_dir`: the body writes into a temporary name in the destination's own folder
  (``.<name>.<pid>.part``); when it returns, the data is flushed to disk (fsync) and renamed over the final name. A
  kill or a full disk at any moment leaves the old file (or folder), the complete new one, or nothing under the final
  name (plus, after a kill, a ``.part`` leftover with this process's id), never a partial file.
- Output folders carry a manifest of the files written (:mod:`beit_mm.fileio.manifest`); ``--overwrite`` removes
  only those (:class:`beit_mm.fileio.output_folder.OutputFolder` writes them).
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import os.path as osp
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Callable

from .dataset_roots import DEMO_MARKER, dataset_layout, enclosing_dataset_root
from .inputs import InputLocalBackend
from .manifest import (MANIFEST, NotOwnedError, file_sha256, folder_entries, manifest_text, owned_files,
                       read_manifest)
from .paths import inside

#: What ``check_output`` is asked about: one file; a folder the tool adds new, uniquely named entries to and never
#: empties (a work dir: MMEngine's ``<timestamp>/`` folders, checkpoints guarded by :mod:`.work_dir`; a study's run
#: cache); a folder of output files that the tool lists in its manifest (``--overwrite`` replaces only those).
KINDS = ('file', 'dir', 'folder')


class OutputError(OSError):
    """A destination that cannot or must not be written; the message names it, the problem and the fix."""


def _same_file(a: str, b: str) -> bool:
    try:
        return osp.samefile(a, b)
    except OSError:
        return False


def _check_link(path: str) -> None:
    if osp.islink(path):
        raise OutputError(f'output {path} is a symbolic link (to {os.readlink(path)}): beit_mm never writes through a '
                          'link, which would change the file it points to; nothing was written. Fix: remove the link, '
                          'or choose another path')


def check_inputs(path: str, inputs: Iterable[str | None], kind: str = 'file') -> None:
    """Raise :class:`OutputError` when the output ``path`` is one of ``inputs`` (files or folders, links resolved, the
    same file under another name too), lies inside an input folder, or (``kind='folder'``) holds an input.

    A work dir (``kind='dir'``) may hold inputs (the checkpoint a test reads from its training work dir): the tool
    only adds new entries to it. Remote inputs (``scheme://``) are skipped.
    """
    real = osp.realpath(path)
    for item in inputs:
        if not item or '://' in str(item):
            continue
        item = str(item)
        other = osp.realpath(item)
        if real == other or _same_file(path, item):
            raise OutputError(f'output {path} is the input {item} (the tool reads it): writing would destroy it; '
                              'nothing was written. Fix: choose another output path')
        if inside(real, other):
            raise OutputError(f'output {path} lies inside the input folder {item}: outputs never go among the files a '
                              'tool reads; nothing was written. Fix: choose an output outside it')
        if kind != 'dir' and inside(other, real):
            raise OutputError(f'output folder {path} holds the input {item}: writing there could replace or remove '
                              'what the tool reads; nothing was written. Fix: choose an output folder that holds no '
                              'input')


def check_dataset_root(path: str, include_self: bool = True) -> None:
    """Raise :class:`OutputError` when ``path`` (links resolved) is or lies inside a folder laid out as a dataset
    root (:func:`beit_mm.fileio.dataset_roots.enclosing_dataset_root`)."""
    root = enclosing_dataset_root(path, include_self=include_self)
    if root is not None:
        why = (f'it holds the demo marker {DEMO_MARKER}' if osp.lexists(osp.join(root, DEMO_MARKER)) else
               f'it holds {" and ".join(f"{name}/" for name in dataset_layout(root) or ())}')
        raise OutputError(f'output {path} lies inside the dataset root {root} ({why}): outputs never go into a '
                          'dataset, where they would replace or join its files; nothing was written. Fix: choose a '
                          'path outside it, e.g. under work_dirs/')


def check_output(path: str, overwrite: bool = False, kind: str = 'file', flag: str = '--overwrite',
                 inputs: Iterable[str | None] = ()) -> None:
    """Raise :class:`OutputError` unless ``path`` can be written as a new ``kind`` (the rules in the module
    docstring); call it before any work.

    Args:
        path: the destination.
        overwrite: whether the user allowed replacing an existing ``path`` (``kind='folder'``: the files its manifest
            lists; ``kind='dir'``: adding to an existing folder).
        kind: ``'file'``, ``'dir'`` or ``'folder'`` (:data:`KINDS`).
        flag: the option that allows replacing, named in the message.
        inputs: what the tool reads (files, folders, data roots; None entries are skipped).
    """
    if kind not in KINDS:
        raise ValueError(f'kind must be one of {KINDS}, not {kind!r}')
    _check_link(path)
    check_inputs(path, inputs, kind)
    check_dataset_root(path, include_self=kind != 'file')
    if osp.isdir(path) and kind == 'file':
        raise OutputError(f'output {path} is a folder; the output is a file. Fix: give a file name, e.g. '
                          f'{osp.join(path, "model" + (osp.splitext(path)[1] or ".pth"))}')
    if osp.exists(path) and kind != 'file' and not osp.isdir(path):
        raise OutputError(f'output {path} is a file; the output is a folder. Fix: give a folder name')
    if kind == 'folder':
        _check_output_folder(path, overwrite, flag)
    elif osp.lexists(path) and not overwrite:
        raise OutputError(f'output {path} exists; nothing was written. Fix: pass {flag} to replace it, or choose '
                          'another path')
    if kind != 'file' and osp.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
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


def _check_output_folder(path: str, overwrite: bool, flag: str) -> None:
    """An output folder may be absent or empty; one holding files needs ``flag`` and a manifest vouching for every
    entry (:func:`beit_mm.fileio.manifest.owned_files`)."""
    if not osp.isdir(path):
        return
    try:
        owned = owned_files(path, 'this tool', flag)
    except NotOwnedError as error:
        raise OutputError(str(error)) from None
    if owned and not overwrite:
        manifest = read_manifest(path) or {}
        raise OutputError(f'output folder {path} holds {len(owned)} files that {manifest.get("written_by")} wrote '
                          f'there; nothing was written. Fix: pass {flag} to replace them (only those are removed), '
                          'or choose another folder')


def _temporary_name(path: str) -> str:
    folder, name = osp.split(osp.abspath(path))
    return osp.join(folder, f'.{name}.{os.getpid()}.part')


def _fsync_path(path: str) -> None:
    """fsync a file, or a folder tree this process wrote (its regular files, its folders and itself). Nothing else
    is opened: not a link, and not a FIFO, socket or device, whose open may block or fail."""
    paths = [path]
    if osp.isdir(path):
        paths = [osp.join(root, name) for root, dirs, files in os.walk(path) for name in files + dirs] + [path]
    for item in paths:
        mode = os.lstat(item).st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            _fsync_one(item)


def _fsync_one(path: str) -> None:
    """fsync one regular file or folder (a folder's own entries: a rename into it), not following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
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
def atomic_file(path: str, tmp: str | None = None, durable: bool = True) -> Iterator[str]:
    """Yield a temporary path next to ``path`` (``tmp``, default ``.<name>.<pid>.part``); write the file there. On
    success it is fsync'ed and renamed to ``path`` (replacing an old file, or a link, in one step: the file a link
    points to is never written); on any error the temporary file is removed and ``path`` is untouched.

    ``durable=False`` skips the fsyncs: a kill still leaves the old file or the new one, a power loss may leave an
    empty one (for files that are cheap to make again, such as demo images).
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = tmp or _temporary_name(path)
    if osp.lexists(tmp) and not osp.isdir(tmp):  # a leftover of a killed writer, or a planted link: never opened
        os.remove(tmp)
    with _removed_on_error(tmp, path):
        yield tmp
        if durable:
            _fsync_path(tmp)
        os.replace(tmp, path)
        if durable:
            _fsync_one(folder)


def _write_manifest_into(folder: str, written_by: str) -> None:
    """Write the manifest of every file now in ``folder`` (:mod:`beit_mm.fileio.manifest`)."""
    files = {rel: file_sha256(osp.join(folder, rel)) for rel in folder_entries(folder)}
    with open(osp.join(folder, MANIFEST), 'w') as f:
        f.write(manifest_text(written_by, files))


@contextlib.contextmanager
def atomic_dir(path: str, written_by: str | None = None) -> Iterator[str]:
    """:func:`atomic_file` for a folder: yield a new temporary folder next to ``path``; on success it replaces
    ``path`` (an old folder is renamed aside, the new one renamed in, then the old one removed: a kill between the
    two renames leaves nothing under ``path`` and the old folder as ``.<name>.<pid>.old``).

    With ``written_by`` (the tool's name) the new folder gets a manifest of its files, and an old folder is replaced
    only when its manifest vouches for everything in it (:func:`beit_mm.fileio.manifest.owned_files`): the files of
    someone else are never removed with it.
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = _temporary_name(path)
    os.makedirs(tmp)
    with _removed_on_error(tmp, path):
        yield tmp
        if written_by is not None:
            if osp.isdir(path) and not osp.islink(path):
                try:
                    owned_files(path, written_by)
                except NotOwnedError as error:
                    raise OutputError(str(error)) from None
            _write_manifest_into(tmp, written_by)
        _fsync_path(tmp)
        old = None
        if osp.lexists(path):
            old = tmp[:-len('.part')] + '.old'
            os.replace(path, old)
        os.replace(tmp, path)
        _fsync_one(folder)
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


class AtomicLocalBackend(InputLocalBackend):
    """MMEngine's ``LocalBackend`` whose ``put``/``put_text`` write atomically (:func:`atomic_write_bytes`) and whose
    reads are the file room's (:class:`.inputs.InputLocalBackend`).

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
