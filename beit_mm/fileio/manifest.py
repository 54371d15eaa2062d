"""The manifest of an output folder: which files a tool wrote there, so that ``--overwrite`` removes only those.

An output folder carries :data:`MANIFEST`, written atomically::

    {"written_by": "<tool>", "files": {"pred/a.png": "<sha256>", ...}, "pending": ["vis/b.jpg", ...]}

``pending`` are files announced before they are written. Removal follows the folder's own entries, never the paths
the manifest names (:func:`owned_files`).
"""
from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
from collections.abc import Iterable

from .inputs import open_input
from .json_file import JSONFileError, read_json

MANIFEST = '.beit_mm_output.json'
MAX_MANIFEST_BYTES = 64 * 2**20  # ~100 bytes per file: half a million files
MAX_NAMED = 3  # entries named in an error


class NotOwnedError(OSError):
    """An output folder holds entries its manifest does not vouch for; the message names them and the fix."""


def file_sha256(path: str) -> str:
    """The sha256 of a file's content, hex."""
    digest = hashlib.sha256()
    with open_input(path, 'file') as f:  # a FIFO or device is refused, never waited on
        for block in iter(lambda: f.read(2**20), b''):
            digest.update(block)
    return digest.hexdigest()


def manifest_text(written_by: str, files: dict[str, str], pending: Iterable[str] = ()) -> str:
    """The manifest's JSON text (sorted names: the same files give the same text)."""
    return json.dumps(dict(written_by=written_by, files=dict(sorted(files.items())), pending=sorted(pending),
                           note='written by a beit_mm tool: --overwrite removes only the files listed here'),
                      indent=1) + '\n'


def read_manifest(folder: str) -> dict | None:
    """The manifest of ``folder`` when it is a plain file that parses as one (``written_by`` a string, ``files`` a
    ``{name: sha256}`` object, ``pending`` a list of names); None otherwise (absent, a link, not a manifest)."""
    path = osp.join(folder, MANIFEST)
    if not osp.isfile(path) or osp.islink(path):
        return None
    try:
        content = read_json(path, max_bytes=MAX_MANIFEST_BYTES, max_depth=4)
    except (OSError, JSONFileError):
        return None
    if not isinstance(content, dict) or not isinstance(content.get('written_by'), str):
        return None
    files, pending = content.get('files'), content.get('pending', [])
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    if not isinstance(pending, list) or not all(isinstance(name, str) for name in pending):
        return None
    return dict(written_by=content['written_by'], files=files, pending=pending)


def folder_entries(folder: str) -> list[str]:
    """Relative paths (``/``-separated) of every entry under ``folder`` that is not a folder (files, links, links
    to folders, sockets), the manifest aside; links are not followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        links = [d for d in dirs if osp.islink(osp.join(root, d))]
        dirs[:] = sorted(d for d in dirs if d not in links)
        for name in sorted(files) + links:
            rel = osp.relpath(osp.join(root, name), folder).replace(os.sep, '/')
            if rel != MANIFEST:
                found.append(rel)
    return found


def _named(items: list[str]) -> str:
    return ', '.join(items[:MAX_NAMED]) + (f', ... ({len(items)} in all)' if len(items) > MAX_NAMED else '')


def owned_files(folder: str, tool: str, flag: str = '--overwrite') -> list[str]:
    """The entries of ``folder`` (relative paths) that its manifest vouches for: what ``flag`` may remove.

    Raises:
        NotOwnedError: ``folder`` holds an entry without a valid manifest, or one that its manifest does not vouch
            for (not listed, changed since it was written, a link, not a plain file); the message names them.
    """
    entries = folder_entries(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        if not entries:
            return []
        raise NotOwnedError(
            f'output folder {folder} holds files that no beit_mm tool recorded writing (no valid {MANIFEST}; found: '
            f'{_named(entries)}): {flag} removes only what a tool wrote, so nothing was written. Fix: choose a new '
            'or empty folder, or move those files away yourself')
    listed, pending = manifest['files'], set(manifest['pending'])
    problems = []
    for rel in entries:
        path = osp.join(folder, rel)
        if osp.islink(path) or not osp.isfile(path):
            problems.append(f'{rel} (a link or not a plain file)')
        elif rel in listed:
            if file_sha256(path) != listed[rel]:
                problems.append(f'{rel} (changed since {manifest["written_by"]} wrote it)')
        elif rel not in pending:
            problems.append(f'{rel} (not written by {manifest["written_by"]})')
    if problems:
        raise NotOwnedError(
            f'output folder {folder} holds files that its manifest does not vouch for: {_named(problems)}. {flag} '
            f'removes only the files {tool} can prove it wrote, so nothing was written. Fix: move those files away, '
            'or choose another folder')
    return entries
