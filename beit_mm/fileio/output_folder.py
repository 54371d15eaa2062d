"""A folder of output files that one tool writes: checked before any work, each file atomic and listed in the
folder's manifest, ``--overwrite`` removing only what the manifest vouches for.

Filled file by file (``begin``, ``file``, ``finish``), or staged (``stage``, then ``commit``) for libraries that write
without a temporary name. Names are listed before they are written, so a kill leaves only whole, listed files.
"""
from __future__ import annotations

import contextlib
import os
import os.path as osp
import shutil
import time
from collections.abc import Iterable, Iterator

from .manifest import (MANIFEST, NotOwnedError, file_sha256, folder_entries, manifest_text, owned_files,
                       read_manifest)
from .outputs import OutputError, atomic_file, check_output

#: Seconds between two manifest updates while files are written one by one (the pending list covers the gap).
MANIFEST_INTERVAL_S = 2.0


class OutputFolder:
    """The output folder ``path`` of the tool ``written_by``, checked at construction (before any work).

    Args:
        path: the folder.
        written_by: the writer's name, recorded in the manifest and named in messages.
        overwrite: the user passed ``flag``: the files a previous run listed may be replaced.
        inputs: what the tool reads (:func:`beit_mm.fileio.outputs.check_output`).
        flag: the option that allows replacing.
        staged: the files are written into :attr:`stage` and moved in by :meth:`commit`.

    Raises:
        OutputError: the folder may not be written, or a stage of an earlier run is in the way.
    """

    def __init__(self, path: str, written_by: str, overwrite: bool = False, inputs: Iterable[str | None] = (),
                 flag: str = '--overwrite', staged: bool = False) -> None:
        check_output(path, overwrite, kind='folder', flag=flag, inputs=inputs)
        self.path, self.written_by, self.flag = path, written_by, flag
        self.files: dict[str, str] = {}
        self._pending: dict[str, None] = {}  # announced names, in order (a dict: O(1) lookups)
        self._flushed = 0.0
        folder, name = osp.split(osp.abspath(path))
        self.stage = osp.join(folder, f'.{name}.part') if staged else None
        if self.stage is not None and osp.lexists(self.stage):
            raise OutputError(f'{self.stage} exists: the files of a {written_by} run that was killed (or is running '
                              f'now) with the output {path}; nothing was written. Fix: wait for that run, or remove '
                              f'{self.stage}')

    def _owned(self) -> list[str]:
        """The entries the manifest vouches for now (checked again: the folder may have changed since the start)."""
        if not osp.isdir(self.path):
            return []
        try:
            return owned_files(self.path, self.written_by, self.flag)
        except NotOwnedError as error:
            raise OutputError(str(error)) from None

    def _write_manifest(self, files: dict[str, str], pending: Iterable[str] = ()) -> None:
        os.makedirs(self.path, exist_ok=True)
        with atomic_file(osp.join(self.path, MANIFEST)) as tmp, open(tmp, 'w') as f:
            f.write(manifest_text(self.written_by, files, sorted(set(pending) - set(files))))
        self._flushed = time.monotonic()

    def _remove_old(self, owned: list[str]) -> None:
        """Remove the ``owned`` files, announced in the manifest first, and the folders they leave empty."""
        listed = read_manifest(self.path)['files'] if owned else {}
        self._write_manifest({rel: listed[rel] for rel in owned if rel in listed}, [*owned, *self._pending])
        for rel in owned:
            os.remove(osp.join(self.path, rel))
        for root, dirs, files in sorted(os.walk(self.path), key=lambda item: -len(item[0])):
            if root != self.path and not dirs and not files and not osp.islink(root):
                os.rmdir(root)

    def begin(self, planned: Iterable[str] = ()) -> None:
        """Remove the previous run's files and record ``planned`` (relative paths) as pending."""
        owned = self._owned()
        self._pending = dict.fromkeys(planned)
        self._remove_old(owned)
        self._write_manifest({}, self._pending)

    @contextlib.contextmanager
    def file(self, rel: str) -> Iterator[str]:
        """Yield a temporary path for the file ``rel`` (``/``-separated); on success it is renamed in and its sha256
        recorded."""
        path = osp.join(self.path, *rel.split('/'))
        if rel not in self._pending:
            self._pending[rel] = None
            self._write_manifest(self.files, self._pending)
        with atomic_file(path) as tmp:
            yield tmp
        self.files[rel] = file_sha256(path)
        if time.monotonic() - self._flushed >= MANIFEST_INTERVAL_S:
            self._write_manifest(self.files, self._pending)

    def finish(self) -> None:
        """Write the final manifest: the files written, by content."""
        self._write_manifest(self.files)

    def commit(self) -> list[str]:
        """Move every file of :attr:`stage` into the folder in place of the previous run's and write the manifest;
        returns the relative paths written.

        Raises:
            OutputError: the folder now holds files its manifest does not vouch for; the new files stay staged.
        """
        if not osp.isdir(self.stage):
            os.makedirs(self.stage)
        try:
            owned = self._owned()
        except OutputError as error:
            raise OutputError(f'{error} The results of this run are in {self.stage}') from None
        new = [rel for rel in folder_entries(self.stage) if osp.isfile(osp.join(self.stage, rel))
               and not osp.islink(osp.join(self.stage, rel))]
        files = {rel: file_sha256(osp.join(self.stage, rel)) for rel in new}
        self._pending = dict.fromkeys(new)
        self._remove_old(owned)
        self._write_manifest(files)  # before the moves
        for rel in new:
            path = osp.join(self.path, *rel.split('/'))
            os.makedirs(osp.dirname(path), exist_ok=True)
            os.replace(osp.join(self.stage, *rel.split('/')), path)
        self.files = files
        shutil.rmtree(self.stage, ignore_errors=True)
        return new

    def discard(self) -> None:
        """Remove :attr:`stage` (the run failed: nothing of it goes into the folder)."""
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)

