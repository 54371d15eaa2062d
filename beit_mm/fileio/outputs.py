"""Writing outputs: destinations checked before any work (:func:`check_output`), files and folders written under a
temporary name and renamed in once flushed (:func:`atomic_file`, :func:`atomic_dir`), so a kill or a full disk leaves
the old output, the whole new one or nothing.
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

#: What ``check_output`` is asked about: one file; a folder the tool only adds new entries to (a work dir, a run
#: cache); a folder of output files listed in its manifest (``--overwrite`` replaces only those).
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
    """Raise :class:`OutputError` when the output ``path`` is one of ``inputs`` (links resolved), lies inside an input
    folder, or holds an input unless ``kind='dir'`` (a tool only adds to a work dir). Remote inputs are skipped."""
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
    """Raise :class:`OutputError` when ``path`` (links resolved) is or lies inside a folder laid out as a dataset."""
    root = enclosing_dataset_root(path, include_self=include_self)
    if root is not None:
        why = (f'it holds the demo marker {DEMO_MARKER}' if osp.lexists(osp.join(root, DEMO_MARKER)) else
               f'it holds {" and ".join(f"{name}/" for name in dataset_layout(root) or ())}')
        raise OutputError(f'output {path} lies inside the dataset root {root} ({why}): outputs never go into a '
                          'dataset, where they would replace or join its files; nothing was written. Fix: choose a '
                          'path outside it, e.g. under work_dirs/')


def check_output(path: str, overwrite: bool = False, kind: str = 'file', flag: str = '--overwrite',
                 inputs: Iterable[str | None] = ()) -> None:
    """Check, before any work, that ``path`` can be written as a new ``kind``.

    Args:
        path: the destination.
        overwrite: whether the user allowed replacing an existing ``path`` (``kind='folder'``: the files its manifest
            lists; ``kind='dir'``: adding to an existing folder).
        kind: ``'file'``, ``'dir'`` or ``'folder'`` (:data:`KINDS`).
        flag: the option that allows replacing, named in the message.
        inputs: what the tool reads (files, folders, data roots; None entries are skipped).

    Raises:
        OutputError: a link, an input, inside a dataset, existing without ``overwrite``, or not writable.
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
    """An output folder holding files needs ``flag`` and a manifest vouching for every entry."""
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
    """fsync a file, or the regular files and folders of a tree this process wrote; nothing else is opened."""
    paths = [path]
    if osp.isdir(path):
        paths = [osp.join(root, name) for root, dirs, files in os.walk(path) for name in files + dirs] + [path]
    for item in paths:
        mode = os.lstat(item).st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            _fsync_one(item)


def _fsync_one(path: str) -> None:
    """fsync one regular file or folder, not following a link."""
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
    """Yield a temporary path next to ``path`` (``tmp``, default ``.<name>.<pid>.part``) to write the file into. On
    success it is fsync'ed and renamed over ``path`` (a link there is replaced, never written through); on any error
    it is removed and ``path`` is untouched. ``durable=False`` skips the fsyncs, for files cheap to make again."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = tmp or _temporary_name(path)
    if osp.lexists(tmp) and not osp.isdir(tmp):  # a killed writer's leftover or a planted link: never opened
        os.remove(tmp)
    with _removed_on_error(tmp, path):
        yield tmp
        if durable:
            _fsync_path(tmp)
        os.replace(tmp, path)
        if durable:
            _fsync_one(folder)


def _write_manifest_into(folder: str, written_by: str) -> None:
    """Write the manifest of every file now in ``folder``."""
    files = {rel: file_sha256(osp.join(folder, rel)) for rel in folder_entries(folder)}
    with open(osp.join(folder, MANIFEST), 'w') as f:
        f.write(manifest_text(written_by, files))


@contextlib.contextmanager
def atomic_dir(path: str, written_by: str | None = None) -> Iterator[str]:
    """:func:`atomic_file` for a folder: yield a new temporary folder next to ``path`` that replaces ``path`` on
    success (the old one renamed aside, then removed). With ``written_by`` the new folder gets a manifest, and an old
    folder is replaced only when its manifest vouches for everything in it."""
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


# A file being written is ``<name>.beit_mm.part`` until it is complete: never matched by ``*.pth`` globs, and a name
# no other program gives (browsers and file managers write ``<name>.part``), so a leftover of that name is this
# library's own.
PARTIAL_SUFFIX = '.beit_mm.part'
ATOMIC_BACKEND = 'beit_mm_atomic_local'


def atomic_write_bytes(data: bytes, path: str, write: Callable[[BinaryIO, bytes], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically through ``path`` + :data:`PARTIAL_SUFFIX`.

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
    """MMEngine's ``LocalBackend`` whose ``put``/``put_text`` write atomically and whose reads are the file room's;
    ``CheckpointHook(backend_args=dict(backend='beit_mm_atomic_local'))`` saves every checkpoint through it."""

    def write_temp(self, f: BinaryIO, data: bytes) -> None:
        """Write the bytes of one file into its open temporary file."""
        f.write(data)

    def put(self, obj: bytes, filepath: str | Path) -> None:
        atomic_write_bytes(obj, str(filepath), write=lambda f, data: self.write_temp(f, data))

    def put_text(self, obj: str, filepath: str | Path, encoding: str = 'utf-8') -> None:
        self.put(obj.encode(encoding), filepath)
