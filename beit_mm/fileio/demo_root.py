"""Demo roots: the folders the demo-data generators write, and the rule that keeps the generators off other data.

A generator (:func:`beit_mm.data.demo.make_demo_ade20k`, :func:`beit_mm.data.demo_imagenet.make_demo_imagenet`)
deletes and rewrites files in its root (images of another count, class folders, annotation files), so
:func:`claim_demo_root` lets it write only where that destroys nothing it did not write:

- the root is absent, or a folder without files: the generator's marker :data:`MARKER` (``.beit_mm_demo.json``: the
  generator and its arguments) is written *first* (atomically: it is whole or absent), so a root half-written by a
  killed run is still recognized;
- the root carries the generator's marker, proven by its content (it parses and names this generator): it is the
  generator's; with the same arguments its complete splits are reused (a second call rewrites nothing), with other
  arguments it is regenerated and the marker records them. A marker file that does not parse, or names nothing, gives
  no right to delete: anyone can create a file of that name;
- the root holds no marker but exactly the files of this call (a demo root written before markers existed): it is
  reused as it is and nothing is written;
- anything else (a real dataset, a folder holding a link, another generator's demo root, a file), a root that is a
  symbolic link, or one inside another dataset root (:mod:`beit_mm.fileio.dataset_roots`):
  :class:`NotADemoRootError` before anything is written.
"""
import json
import os
import os.path as osp
from typing import Collection, Iterator, List, Tuple

from .dataset_roots import DEMO_MARKER, enclosing_dataset_root
from .json_file import JSONFileError, read_json
from .outputs import atomic_file

MARKER = DEMO_MARKER
MAX_NAMED_FILES = 3  # files of a refused root named in the error

# What claim_demo_root lets a generator do in its root.
KEEP = 'keep'  # an unmarked old demo holding exactly the files of this call: write nothing
UPDATE = 'update'  # marked, same arguments: reuse complete splits, write the rest
REWRITE = 'rewrite'  # new or empty, or marked with other arguments: write every split


class NotADemoRootError(RuntimeError):
    """A demo generator was given a root it did not make; the message names the root, files there and the fix."""


def _entries(root: str) -> Iterator[str]:
    """Relative paths of every non-folder entry under ``root`` (files, links, links to folders), in sorted walk order;
    links are not followed."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        links = [d for d in dirs if osp.islink(osp.join(folder, d))]
        for name in sorted(files) + links:
            yield osp.relpath(osp.join(folder, name), root)


def _survey(root: str, expected: Collection[str]) -> Tuple[List[str], bool]:
    """(up to :data:`MAX_NAMED_FILES` + 1 entries found under ``root``, whether they are exactly ``expected``).

    Stops walking once it has enough examples and has seen an entry outside ``expected`` (a real dataset root can
    hold a million files)."""
    expected = set(expected)
    examples, matched, foreign = [], 0, False
    for path in _entries(root):
        if len(examples) <= MAX_NAMED_FILES:
            examples.append(path)
        if path in expected:
            matched += 1
        else:
            foreign = True
        if foreign and len(examples) > MAX_NAMED_FILES:
            break
    return examples, not foreign and matched == len(expected) > 0


MAX_MARKER_BYTES = 64 * 1024


def _read_marker(root: str) -> dict:
    """The marker's content; ``{}`` when it cannot be read or is not a JSON object (which then proves nothing)."""
    try:
        content = read_json(osp.join(root, MARKER), max_bytes=MAX_MARKER_BYTES, max_depth=8)
    except (OSError, JSONFileError):
        return {}
    return content if isinstance(content, dict) else {}


def _write_marker(root: str, generator: str, arguments: dict) -> None:
    """Write the marker unless it already holds ``generator`` and ``arguments`` (a reused root stays untouched)."""
    content = dict(generator=generator, arguments=arguments,
                   note='written by a beit_mm demo-data generator, which deletes and rewrites files in this folder')
    if _read_marker(root) == content:
        return
    with atomic_file(osp.join(root, MARKER)) as tmp, open(tmp, 'w') as f:
        json.dump(content, f, indent=1)
        f.write('\n')


def _refusal(root: str, generator: str, examples: List[str]) -> NotADemoRootError:
    named = ', '.join(examples[:MAX_NAMED_FILES]) + (', ...' if len(examples) > MAX_NAMED_FILES else '')
    short = generator.rsplit('.', 1)[-1]
    return NotADemoRootError(
        f'{root} is not a demo root (no {MARKER}) and holds other files (found: {named}): {short} refuses to write '
        'there, because it deletes and rewrites files in its root. Fix: pass a new or empty folder as the root '
        '(--root), or delete the folder yourself if it is an old demo.')


def claim_demo_root(root: str, generator: str, arguments: dict, expected: Collection[str]) -> str:
    """Decide whether ``generator`` may write its demo into ``root`` (the rules in the module docstring).

    Args:
        root: the dataset root the generator was given.
        generator: the generator's qualified name, e.g. ``'beit_mm.data.demo.make_demo_ade20k'`` (kept in the marker).
        arguments: the generator's arguments except ``root`` (kept in the marker; JSON-serializable).
        expected: relative paths of every file this call writes, the marker aside.

    Returns:
        :data:`REWRITE` or :data:`UPDATE`: the root is the generator's (its marker, with ``arguments``, is in place
        now); write every split, or only the incomplete ones. :data:`KEEP`: the root holds exactly ``expected``
        without a marker (an old demo); use it as it is and write nothing.

    Raises:
        NotADemoRootError: the root is a file, another generator's demo root, or a folder holding other files.
    """
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
    if osp.lexists(osp.join(root, MARKER)):
        owner = _read_marker(root).get('generator')
        if owner is None or osp.islink(osp.join(root, MARKER)):
            raise NotADemoRootError(
                f'{root} holds a {MARKER} that is not a demo generator\'s marker (a link, or it does not parse as one): '
                'it proves nothing, so nothing there is deleted. Fix: pass a new or empty folder as the root (--root), '
                'or delete the folder yourself if it is an old demo.')
        if owner != generator:
            raise NotADemoRootError(
                f'{root} is a demo root of {owner}, not of {generator}: refusing to write there. Fix: pass a new or '
                'empty folder as the root (--root), or delete the folder yourself to make this demo there.')
        same = _read_marker(root).get('arguments') == arguments
        _write_marker(root, generator, arguments)
        return UPDATE if same else REWRITE
    examples, exact = _survey(root, expected) if osp.isdir(root) else ([], False)
    if exact:
        return KEEP
    if examples:
        raise _refusal(root, generator, examples)
    os.makedirs(root, exist_ok=True)
    _write_marker(root, generator, arguments)
    return REWRITE
