"""The work dir of a training run: refused while it holds another run's checkpoints (a new run would overwrite them
one save at a time), and written only over files its manifest lists with their sha256.
"""
from __future__ import annotations

import fnmatch
import logging
import os
import os.path as osp
import re

from mmengine.logging import print_log

from .checkpoint import is_complete_checkpoint
from .inputs import open_input
from .manifest import MANIFEST, file_sha256, manifest_text, read_manifest
from .outputs import OutputError, atomic_file, check_output
from .paths import inside

#: The tool named in a work dir's manifest.
WORK_DIR_WRITER = 'tools/train.py'

#: What an earlier training run leaves in its work dir (MMEngine's ``CheckpointHook`` names).
CHECKPOINT_PATTERNS = ('iter_*.pth', 'epoch_*.pth', 'best_*.pth', 'last_checkpoint')
_CHECKPOINT_NAME = re.compile(r'^(?:iter|epoch)_(\d+)\.pth$')


class WorkDirInUseError(RuntimeError):
    """A new run was pointed at a work dir holding another run's checkpoints."""


def earlier_checkpoints(work_dir: str) -> list[str]:
    """Entries of ``work_dir`` that :data:`CHECKPOINT_PATTERNS` match, newest first, ``last_checkpoint`` last."""
    if not osp.isdir(work_dir):
        return []
    names = [n for n in os.listdir(work_dir) if any(fnmatch.fnmatchcase(n, p) for p in CHECKPOINT_PATTERNS)]
    return sorted(names, key=lambda n: (n == 'last_checkpoint', -os.stat(osp.join(work_dir, n)).st_mtime_ns, n))


def check_new_run_work_dir(work_dir: str, resume: str | None, overwrite: bool) -> None:
    """Refuse, unless ``overwrite``, a new run (``resume`` None) in a work dir that holds an earlier run's checkpoints,
    and a run resumed there from a checkpoint outside it (``resume`` a path not inside ``work_dir``).

    Args:
        work_dir: the run's work dir (``cfg.work_dir``), which may not exist yet.
        resume: None for a new run, ``'auto'`` (the work dir's own last checkpoint) or a checkpoint path.
        overwrite: run there anyway; its saves overwrite the earlier run's files.

    Raises:
        WorkDirInUseError: naming the work dir, its newest checkpoint and the ways out.
    """
    if overwrite or resume == 'auto' or (resume is not None and inside(resume, work_dir)):
        return
    found = earlier_checkpoints(work_dir)
    if found and resume is None:
        raise WorkDirInUseError(
            f'{work_dir} holds checkpoints of an earlier run (newest: {found[0]}, {len(found)} found): a new run '
            'there would overwrite them as it saves. Fix: --resume to continue that run, --overwrite to start again '
            'over it, or --work-dir with a new folder.')
    if found:
        raise WorkDirInUseError(
            f'{work_dir} holds checkpoints of another run (newest: {found[0]}, {len(found)} found), and --resume '
            f'{resume} lies outside it: the resumed run would save over them (iter_N.pth, last_checkpoint, best_*). '
            'Fix: --work-dir with a new folder (or the checkpoint\'s own work dir), --resume without a path to '
            'continue the run of this work dir, or --overwrite to write over it.')


def check_work_dir(work_dir: str, inputs=()) -> None:
    """Raise :class:`beit_mm.fileio.outputs.OutputError` unless ``work_dir`` may be a run's work dir: not a link or a
    file, not inside a dataset root or one of ``inputs``, writable. It may hold inputs."""
    check_output(work_dir, overwrite=True, kind='dir', inputs=inputs)


def _config_dump_path(work_dir: str, config: str) -> str:
    return osp.join(work_dir, osp.basename(config))  # as MMEngine's Runner.dump_config


def check_config_dump(work_dir: str, config: str) -> None:
    """Refuse (:class:`~beit_mm.fileio.outputs.OutputError`) when MMEngine's config dump would replace a file the
    work dir's manifest does not list with its present content."""
    path = _config_dump_path(work_dir, config)
    if not osp.lexists(path):
        return
    listed = (read_manifest(work_dir) or {}).get('files', {})
    name = osp.basename(path)
    if not osp.islink(path) and osp.isfile(path) and name in listed and file_sha256(path) == listed[name]:
        return
    what = ('the config file this run reads' if osp.exists(config) and osp.samefile(path, config) else
            'a link' if osp.islink(path) else 'a file no beit_mm run recorded writing there' if name not in listed
            else 'a file changed since a beit_mm run wrote it')
    raise OutputError(f'{path} is {what}, and MMEngine writes the config dump of this run under that name: it would '
                      'be replaced; nothing was written. Fix: move it away, or choose another --work-dir (or give the '
                      'config another file name)')


def record_config_dump(work_dir: str, config: str) -> None:
    """List the config dump MMEngine wrote in the work dir's manifest, so that a later run may replace it."""
    record_written(work_dir, osp.basename(config))


def check_replaceable(work_dir: str, name: str) -> None:
    """Refuse (:class:`~beit_mm.fileio.outputs.OutputError`) to write ``name`` of ``work_dir`` over an entry the
    manifest does not list with its present content."""
    path = osp.join(work_dir, name)
    if not osp.lexists(path) or recorded_file(work_dir, name):
        return
    listed = (read_manifest(work_dir) or {}).get('files', {})
    what = 'a link' if osp.islink(path) else 'not a file a beit_mm tool recorded writing there' if name not in \
        listed else 'a file changed since a beit_mm tool wrote it'
    raise OutputError(f'{path} is {what}: it is not replaced; nothing was written. Fix: move it away, or choose '
                      'another work dir')


def recorded_file(folder: str, name: str) -> bool:
    """Whether the entry ``name`` of ``folder`` is a plain file its manifest lists with its present sha256."""
    path = osp.join(folder, name)
    if osp.islink(path) or not osp.isfile(path):
        return False
    return (read_manifest(folder) or {}).get('files', {}).get(name) == file_sha256(path)


def write_work_dir_file(work_dir: str, name: str, data: str | bytes) -> None:
    """Write the file ``name`` into ``work_dir`` atomically, only over a file the manifest lists, and list it."""
    check_replaceable(work_dir, name)
    with atomic_file(osp.join(work_dir, name)) as tmp, open(tmp, 'wb') as f:
        f.write(data.encode('utf-8') if isinstance(data, str) else data)
    record_written(work_dir, name)


def record_written(work_dir: str, name: str) -> None:
    """List the file ``name`` of ``work_dir`` in the work dir's manifest with its sha256 (other entries kept)."""
    path = osp.join(work_dir, name)
    if osp.islink(path) or not osp.isfile(path):
        return
    manifest = read_manifest(work_dir) or dict(written_by=WORK_DIR_WRITER, files={}, pending=[])
    files = dict(manifest['files'], **{name: file_sha256(path)})
    if files == manifest['files'] and osp.isfile(osp.join(work_dir, MANIFEST)):
        return
    with atomic_file(osp.join(work_dir, MANIFEST)) as tmp, open(tmp, 'w') as f:
        f.write(manifest_text(manifest['written_by'], files, manifest['pending']))


MAX_POINTER_BYTES = 4096  # a last_checkpoint file holds one path


def read_last_checkpoint(work_dir: str) -> tuple[str | None, str | None]:
    """What ``work_dir/last_checkpoint`` names: ``(path, None)`` for a local file inside ``work_dir``, else
    ``(None, why)`` (``why`` None without a pointer). A URL or a path outside the work dir is never followed: anyone
    with access to a shared work dir can edit the pointer."""
    pointer = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(pointer):
        return None, None
    if osp.getsize(pointer) > MAX_POINTER_BYTES:
        return None, f'{pointer} is {osp.getsize(pointer)} bytes, not one path'
    with open_input(pointer, 'checkpoint pointer') as f:
        named = f.read(MAX_POINTER_BYTES).decode('utf-8', errors='replace').strip()
    if not named:
        return None, f'{pointer} is empty'
    if '://' in named or '\n' in named:
        return None, f'{pointer} names {named[:200]!r}, not a local file (a pointer is never followed to a URL)'
    if not osp.isabs(named) and not osp.exists(named):
        named = osp.join(work_dir, named)
    if not inside(named, work_dir):
        return None, f'{pointer} names {named}, outside {work_dir} (a pointer is never followed out of its work dir)'
    return named, None


def find_last_complete_checkpoint(work_dir: str) -> str | None:
    """The checkpoint to resume from: the complete file ``last_checkpoint`` names, else the complete
    ``iter_N.pth``/``epoch_N.pth`` with the largest N (with a warning); None when there is none."""
    pointer = osp.join(work_dir, 'last_checkpoint')
    named, why = read_last_checkpoint(work_dir)
    if named is not None:
        if is_complete_checkpoint(named):
            return named
        why = f'{pointer} names {named}, which is missing or incomplete'
    candidates = []
    for name in os.listdir(work_dir) if osp.isdir(work_dir) else []:
        match = _CHECKPOINT_NAME.match(name)
        if match and osp.isfile(osp.join(work_dir, name)) and not osp.islink(osp.join(work_dir, name)):
            candidates.append((int(match.group(1)), osp.join(work_dir, name)))
    for _, path in sorted(candidates, reverse=True):
        if is_complete_checkpoint(path):
            if why is not None:
                print_log(f'{why}; resuming from {path}, the newest complete checkpoint', logger='current',
                          level=logging.WARNING)
            return path
    if why is not None:
        print_log(f'{why}, and {work_dir} holds no other complete checkpoint', logger='current',
                  level=logging.WARNING)
    return None
