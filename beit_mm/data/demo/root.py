"""Demo roots: the folders the demo-data generators write, and the rule that keeps the generators off other data.

A generator writes through a :class:`GeneratedTree` only. A file is replaced or removed only when the root's
:data:`JOURNAL` (``<sha256> <path>`` lines, appended before the file appears) lists it with its present content; a
root holding anything else (a user's file, a changed file, a link, a FIFO), another generator's root or a root inside
a dataset root is refused whole with :class:`NotADemoRootError` before anything is written. No link is followed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import os.path as osp
import stat
from collections.abc import Collection, Iterable, Iterator

from ...fileio.dataset_roots import DEMO_MARKER, enclosing_dataset_root
from ...fileio.inputs import open_input
from ...fileio.json_file import JSONFileError, read_json
from ...fileio.manifest import file_sha256
from ...fileio.outputs import atomic_file
from ...fileio.text_file import read_bounded

MARKER = DEMO_MARKER
JOURNAL = '.beit_mm_demo.files'  # what the generator wrote: "<sha256> <relative path>" lines
OWN_FILES = (MARKER, JOURNAL)
MAX_NAMED_FILES = 3  # files of a refused root named in the error
MAX_JOURNAL_BYTES = 256 * 2**20  # ~100 bytes a file: two million files

KEEP = 'keep'  # an unmarked (or journal-less) old demo holding exactly the files of this call: write nothing
UPDATE = 'update'  # marked, same arguments: reuse complete splits, write the rest
REWRITE = 'rewrite'  # new or empty, or marked with other arguments: write every split


class NotADemoRootError(RuntimeError):
    """A demo generator was given a root it did not make; the message names the root, files there and the fix."""


def _entries(root: str) -> Iterator[str]:
    """Relative paths of every non-folder entry under ``root`` but the marker and journal; links not followed."""
    for folder, dirs, files in os.walk(root):
        links = [d for d in dirs if osp.islink(osp.join(folder, d))]
        dirs[:] = sorted(d for d in dirs if d not in links)
        for name in sorted(files) + links:
            rel = osp.relpath(osp.join(folder, name), root).replace(os.sep, '/')
            if rel not in OWN_FILES and not (rel.startswith(OWN_FILES) and rel.endswith('.part')):
                yield rel


def _named(items: list[str]) -> str:
    return ', '.join(items[:MAX_NAMED_FILES]) + (', ...' if len(items) > MAX_NAMED_FILES else '')


def _survey(root: str, expected: Collection[str]) -> tuple[list[str], bool]:
    """(up to :data:`MAX_NAMED_FILES` + 1 entries under ``root``, whether they are exactly ``expected``, all plain
    files); stops early once an entry outside ``expected`` is seen."""
    expected = {rel.replace(os.sep, '/') for rel in expected}
    examples, matched, foreign = [], 0, False
    for path in _entries(root):
        if len(examples) <= MAX_NAMED_FILES:
            examples.append(path)
        full = osp.join(root, path)
        if path in expected and osp.isfile(full) and not osp.islink(full):
            matched += 1
        else:
            foreign = True
        if foreign and len(examples) > MAX_NAMED_FILES:
            break
    return examples, not foreign and matched == len(expected) > 0


MAX_MARKER_BYTES = 64 * 1024


def _read_marker(root: str) -> dict:
    """The marker's content; ``{}`` when it cannot be read or is not a JSON object."""
    path = osp.join(root, MARKER)
    if osp.islink(path):
        return {}
    try:
        content = read_json(path, max_bytes=MAX_MARKER_BYTES, max_depth=8)
    except (OSError, JSONFileError):
        return {}
    return content if isinstance(content, dict) else {}


def _write_marker(root: str, generator: str, arguments: dict) -> None:
    """Write the marker unless it already holds ``generator`` and ``arguments``."""
    content = dict(generator=generator, arguments=arguments,
                   note=f'written by a beit_mm demo-data generator, which replaces and removes in this folder only '
                   f'the files {JOURNAL} lists with their content')
    if _read_marker(root) == content:
        return
    with atomic_file(osp.join(root, MARKER)) as tmp, open(tmp, 'w') as f:
        json.dump(content, f, indent=1)
        f.write('\n')


def _read_journal(root: str) -> dict[str, set[str]] | None:
    """``{path: {sha256, ...}}`` from the journal; None when it is absent, a link, too large or malformed."""
    path = osp.join(root, JOURNAL)
    if osp.islink(path) or not osp.isfile(path):
        return None
    try:
        text = read_bounded(path, MAX_JOURNAL_BYTES, OSError, 'demo journal').decode('utf-8')
    except (OSError, UnicodeDecodeError):
        return None
    files: dict[str, set[str]] = {}
    for line in text.splitlines():
        sha, _, rel = line.partition(' ')
        if not rel or rel.startswith('/') or '..' in rel.split('/') or len(sha) != 64 or \
                not all(c in '0123456789abcdef' for c in sha):
            return None
        files.setdefault(rel, set()).add(sha)
    return files


def _journal_text(hashes: dict[str, str]) -> str:
    return ''.join(f'{sha} {rel}\n' for rel, sha in sorted(hashes.items()))


def _temporary(rel: str) -> str:
    folder, _, name = rel.rpartition('/')
    return f'{folder}/.{name}.part' if folder else f'.{name}.part'


def _refusal(root: str, generator: str, examples: list[str]) -> NotADemoRootError:
    short = generator.rsplit('.', 1)[-1]
    return NotADemoRootError(
        f'{root} is not a demo root (no {MARKER}) and holds other files (found: {_named(examples)}): {short} refuses '
        'to write there, because it replaces and removes files in its root. Fix: pass a new or empty folder as the '
        'root (--root), or delete the folder yourself if it is an old demo.')


class GeneratedTree:
    """A demo root opened by :func:`open_demo_root`; every write and removal of its generator goes through here.

    Attributes:
        root: the root folder.
        generator: the generator's qualified name.
        mode: :data:`KEEP`, :data:`UPDATE` or :data:`REWRITE`.
    """

    def __init__(self, root: str, generator: str, mode: str, hashes: dict[str, str], parts: set[str]) -> None:
        self.root, self.generator, self.mode = root, generator, mode
        self._hashes = hashes  # owned files: relative path -> sha256 of the content on disk
        self._parts = parts  # owned temporary files (a killed run's)
        self._journaled = {rel: {sha} for rel, sha in hashes.items()}  # what the journal on disk vouches for

    def owned(self) -> list[str]:
        """The files (relative paths) this generator may replace or remove."""
        return sorted(self._hashes)

    def complete(self, rels: Iterable[str]) -> bool:
        """Whether every file of ``rels`` is present with the content the generator wrote."""
        return all(self._norm(rel) in self._hashes for rel in rels)

    def _norm(self, rel: str) -> str:
        rel = rel.replace(os.sep, '/')
        parts = rel.split('/')
        if osp.isabs(rel) or not rel or any(p in ('', '.', '..') for p in parts) or rel in OWN_FILES:
            raise ValueError(f'{rel!r} is not a relative path of a file in the demo root {self.root}')
        return rel

    def _folder(self, rel: str) -> str:
        """The folder of ``rel`` under the root, created one level at a time, never through a link."""
        folder = self.root
        for name in rel.split('/')[:-1]:
            folder = osp.join(folder, name)
            if osp.islink(folder) or (osp.lexists(folder) and not osp.isdir(folder)):
                raise NotADemoRootError(f'{folder} in the demo root {self.root} is a link or not a folder: a demo '
                                        'generator never writes through it. Fix: remove it, or pass a new folder as '
                                        'the root (--root)')
            if not osp.lexists(folder):
                os.mkdir(folder)
        return folder

    def _append(self, rel: str, sha: str) -> None:
        """Append ``<sha> <rel>`` to the journal, before the file appears."""
        with open(osp.join(self.root, JOURNAL), 'a', encoding='utf-8') as f:
            f.write(f'{sha} {rel}\n')
        self._journaled.setdefault(rel, set()).add(sha)

    def _check_replaceable(self, rel: str) -> None:
        path = osp.join(self.root, rel)
        if osp.lexists(path) and rel not in self._hashes:
            raise NotADemoRootError(f'{path} is not a file {self.generator} wrote (not in {JOURNAL} with its '
                                    'content): it is neither replaced nor removed. Fix: move it away, or pass a new '
                                    'folder as the root (--root)')

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write the file ``rel``: journaled, written to a temporary name and renamed in; equal content is kept."""
        if self.mode == KEEP:
            raise NotADemoRootError(f'{self.root} is an old demo root used as it is; nothing is written there')
        rel = self._norm(rel)
        sha = hashlib.sha256(data).hexdigest()
        if self._hashes.get(rel) == sha:
            return
        self._check_replaceable(rel)
        folder = self._folder(rel)
        name = rel.rsplit('/', 1)[-1]
        tmp_rel = _temporary(rel)
        self._append(rel, sha)
        tmp = osp.join(folder, f'.{name}.part')
        if osp.lexists(tmp):  # a killed run's temporary file of this name: the claim checked it is one
            if tmp_rel not in self._parts:
                raise NotADemoRootError(f'{tmp} appeared in the demo root {self.root} while the generator ran; it is '
                                        'not removed. Fix: move it away and run again')
            os.remove(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 0o644)
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        os.replace(tmp, osp.join(folder, name))
        self._parts.discard(tmp_rel)
        self._hashes[rel] = sha

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode('utf-8'))

    def save_image(self, rel: str, image, **kwargs) -> None:
        """:meth:`write_bytes` of a PIL image in the format its suffix names."""
        from PIL import Image
        buffer = io.BytesIO()
        image.save(buffer, format=Image.registered_extensions()[osp.splitext(rel)[1].lower()], **kwargs)
        self.write_bytes(rel, buffer.getvalue())

    def remove(self, rel: str) -> None:
        """Remove the file ``rel``, which must be one the generator wrote (journaled, its content unchanged)."""
        rel = self._norm(rel)
        self._check_replaceable(rel)
        path = osp.join(self.root, rel)
        if rel in self._hashes and osp.lexists(path):
            os.remove(path)
        self._hashes.pop(rel, None)

    def remove_stale(self, keep: Iterable[str]) -> list[str]:
        """Remove the generator's files not in ``keep`` and the folders left empty; returns the paths removed."""
        keep = {self._norm(rel) for rel in keep}
        stale = [rel for rel in self._hashes if rel not in keep]
        for rel in stale:
            self.remove(rel)
        for rel in sorted(self._parts):
            path = osp.join(self.root, rel)
            if osp.lexists(path) and not osp.islink(path) and osp.isfile(path):
                os.remove(path)
        self._parts.clear()
        for folder, _, _ in os.walk(self.root, topdown=False):  # deepest first; links are not walked into
            if folder != self.root and not osp.islink(folder) and not os.listdir(folder):
                os.rmdir(folder)
        return stale

    def finish(self) -> None:
        """Rewrite the journal with one line per file now present."""
        if self.mode == KEEP:
            return
        _rewrite_journal(self.root, self._hashes)
        self._journaled = {rel: {sha} for rel, sha in self._hashes.items()}


def _rewrite_journal(root: str, hashes: dict[str, str]) -> None:
    path = osp.join(root, JOURNAL)
    if osp.isfile(path) and not osp.islink(path) and osp.getsize(path) <= MAX_JOURNAL_BYTES:
        with open_input(path, 'demo journal') as f:
            if f.read().decode('utf-8', errors='replace') == _journal_text(hashes):
                return
    with atomic_file(osp.join(root, JOURNAL), durable=False) as tmp, open(tmp, 'w') as f:
        f.write(_journal_text(hashes))


_OPEN: dict[str, GeneratedTree] = {}  # real root -> the tree its last claim opened (write_demo_file finds it)


def _check_location(root: str) -> None:
    if osp.islink(root):
        raise NotADemoRootError(f'{root} is a symbolic link (to {os.readlink(root)}): a demo generator never writes '
                                'through a link. Fix: pass the folder itself, or a new folder, as the root (--root).')
    outer = enclosing_dataset_root(root, include_self=False)
    if outer is not None:
        raise NotADemoRootError(f'{root} lies inside the dataset root {outer}: a demo generator never writes into '
                                'another dataset. Fix: pass a new folder outside it as the root (--root).')
    if osp.lexists(root) and not osp.isdir(root):  # a file, or a link to nothing
        raise NotADemoRootError(f'{root} is a file, not a folder: a demo generator writes a dataset folder there. '
                                'Fix: pass a new or empty folder as the root (--root).')


def _owned_entries(root: str, generator: str, files: dict[str, set[str]]) -> tuple[dict[str, str], set[str]]:
    """The files of ``root`` the journal vouches for; :class:`NotADemoRootError` naming any other entry."""
    parts = {_temporary(rel) for rel in files}
    hashes, found_parts, problems = {}, set(), []
    for rel in _entries(root):
        path = osp.join(root, rel)
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            problems.append(f'{rel} (a link or not a plain file)')
        elif rel in parts:
            found_parts.add(rel)
        elif rel not in files:
            problems.append(f'{rel} (not written by the generator)')
        else:
            sha = file_sha256(path)
            if sha in files[rel]:
                hashes[rel] = sha
            else:
                problems.append(f'{rel} (changed since the generator wrote it)')
    if problems:
        raise NotADemoRootError(
            f'{root} is a demo root of {generator}, but holds entries that its {JOURNAL} does not vouch for: '
            f'{_named(problems)}. The generator replaces and removes only files it can prove it wrote, so it refuses '
            'to write there; nothing was changed. Fix: move those entries out of the root (your own images belong in '
            'a dataset of their own), or pass a new folder as the root (--root).')
    return hashes, found_parts


def open_demo_root(root: str, generator: str, arguments: dict, expected: Collection[str]) -> GeneratedTree:
    """Open ``root`` for ``generator`` and return its :class:`GeneratedTree`.

    Args:
        root: the dataset root the generator was given.
        generator: the generator's id, kept in the marker.
        arguments: the generator's arguments except ``root`` (JSON-serializable).
        expected: relative paths of every file this call writes.

    Raises:
        NotADemoRootError: the root is not one this generator may write; nothing was written.
    """
    _check_location(root)
    if osp.lexists(osp.join(root, MARKER)):
        owner = _read_marker(root).get('generator')
        if owner is None:
            raise NotADemoRootError(
                f'{root} holds a {MARKER} that is not a demo generator\'s marker (a link, or it does not parse as one): '
                'it proves nothing, so nothing there is deleted. Fix: pass a new or empty folder as the root (--root), '
                'or delete the folder yourself if it is an old demo.')
        if owner != generator:
            raise NotADemoRootError(
                f'{root} is a demo root of {owner}, not of {generator}: refusing to write there. Fix: pass a new or '
                'empty folder as the root (--root), or delete the folder yourself to make this demo there.')
        same = _read_marker(root).get('arguments') == arguments
        journal = _read_journal(root)
        if journal is None:  # a marker alone proves nothing
            examples, exact = _survey(root, expected)
            if exact and same and not osp.lexists(osp.join(root, JOURNAL)):
                tree = GeneratedTree(root, generator, KEEP, {}, set())
                _OPEN[osp.realpath(root)] = tree
                return tree
            if examples or osp.lexists(osp.join(root, JOURNAL)):
                raise NotADemoRootError(
                    f'{root} holds a {MARKER} but no valid record ({JOURNAL}) of the files its generator wrote, and '
                    f'holds files (found: {_named(examples) or JOURNAL}): a marker proves nothing by itself, so '
                    f'{generator.rsplit(".", 1)[-1]} refuses to write there. Fix: pass a new or empty folder as the '
                    'root (--root), or delete the folder yourself if it is an old demo.')
            journal = {}
        hashes, parts = _owned_entries(root, generator, journal)
        mode = UPDATE if same else REWRITE
    else:
        examples, exact = _survey(root, expected) if osp.isdir(root) else ([], False)
        if exact:
            tree = GeneratedTree(root, generator, KEEP, {}, set())
            _OPEN[osp.realpath(root)] = tree
            return tree
        if examples:
            raise _refusal(root, generator, examples)
        os.makedirs(root, exist_ok=True)
        hashes, parts, mode = {}, set(), REWRITE
    _write_marker(root, generator, arguments)  # first: a killed run leaves a root the next call recognizes
    tree = GeneratedTree(root, generator, mode, hashes, parts)
    if _read_journal(root) != tree._journaled:
        _rewrite_journal(root, hashes)
    _OPEN[osp.realpath(root)] = tree
    return tree


def claim_demo_root(root: str, generator: str, arguments: dict, expected: Collection[str]) -> str:
    """:func:`open_demo_root`'s mode; the tree stays open for :func:`demo_tree`."""
    return open_demo_root(root, generator, arguments, expected).mode


def demo_tree(path: str) -> GeneratedTree:
    """The open :class:`GeneratedTree` whose root holds ``path`` (the last claim of that root)."""
    real = osp.realpath(osp.dirname(osp.abspath(path)))
    best = None
    for root, tree in _OPEN.items():
        if (real == root or real.startswith(root.rstrip(os.sep) + os.sep)) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        raise NotADemoRootError(f'{path} lies in no demo root claimed by this process: a demo generator writes only '
                                'after claim_demo_root (or open_demo_root) opened its root')
    return _OPEN[best]


def _relative(tree: GeneratedTree, path: str) -> str:
    return osp.relpath(osp.join(osp.realpath(osp.dirname(osp.abspath(path))), osp.basename(path)),
                       osp.realpath(tree.root)).replace(os.sep, '/')


def write_demo_file(path: str, data: bytes | str) -> None:
    """Write ``data`` (bytes, or text in UTF-8) at ``path`` in a claimed demo root."""
    tree = demo_tree(path)
    tree.write_bytes(_relative(tree, path), data.encode('utf-8') if isinstance(data, str) else data)


def save_demo_image(image, path: str, **kwargs) -> None:
    """Save the PIL ``image`` at ``path`` in a claimed demo root, in the format its suffix names."""
    tree = demo_tree(path)
    tree.save_image(_relative(tree, path), image, **kwargs)


def remove_demo_file(path: str) -> None:
    """Remove ``path`` in a claimed demo root when the generator wrote it."""
    tree = demo_tree(path)
    tree.remove(_relative(tree, path))
