"""Every config's values as JSON (``Config.to_dict()``), and the differences between two such snapshots."""
from __future__ import annotations

import glob
import json
import os.path as osp

from mmengine.config import Config

from ..fileio.json_file import read_json
from ..fileio.outputs import atomic_write_bytes, check_output

ABSENT = '<absent>'


def snapshot(root: str) -> dict:
    """``{path relative to root: to_dict() as JSON values}`` of every config under ``root`` outside ``_base_``; a
    config that does not load maps to ``{'__error__': message}``. ``custom_imports`` are not imported: they register
    classes and change no value."""
    out = {}
    for path in sorted(glob.glob(osp.join(root, '**', '*.py'), recursive=True)):
        rel = osp.relpath(path, root)
        if '_base_' in rel.split(osp.sep):
            continue
        try:
            values = Config.fromfile(path, import_custom_modules=False).to_dict()
        except Exception as e:  # a config that does not load is a difference too
            values = {'__error__': f'{type(e).__name__}: {e}'}
        out[rel] = json.loads(json.dumps(values, sort_keys=True, default=repr))
    return out


def write_snapshot(root: str, out: str, overwrite: bool = False) -> dict:
    """Write :func:`snapshot` of ``root`` to the JSON file ``out`` (checked first, written atomically)."""
    check_output(out, overwrite=overwrite, inputs=[root])
    shot = snapshot(root)
    atomic_write_bytes(json.dumps(shot, sort_keys=True, indent=1).encode(), out)
    return shot


def load_snapshot(path: str) -> dict:
    """A snapshot: :func:`snapshot` of ``path`` when it is a configs folder, else the JSON file ``path`` (bounded)."""
    return snapshot(path) if osp.isdir(path) else read_json(path)


def _flat(value, prefix: str = '') -> dict:
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return {prefix: value}
    flat = {prefix: type(value).__name__} if not value else {}
    for key, item in items:
        flat.update(_flat(item, f'{prefix}.{key}' if prefix else str(key)))
    return flat


def compare(before: dict, after: dict) -> list[str]:
    """One line per config that is missing, added or differs (with the first 20 differing keys)."""
    lines = [f'{name}: missing' for name in sorted(set(before) - set(after))]
    lines += [f'{name}: added' for name in sorted(set(after) - set(before))]
    for name in sorted(set(before) & set(after)):
        a, b = _flat(before[name]), _flat(after[name])
        keys = sorted(k for k in set(a) | set(b) if a.get(k, ABSENT) != b.get(k, ABSENT))
        if keys:
            lines.append(f'{name}: {len(keys)} keys differ: ' + ', '.join(
                f'{k} ({a.get(k, ABSENT)!r} -> {b.get(k, ABSENT)!r})' for k in keys[:20]))
    return lines
