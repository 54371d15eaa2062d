"""Snapshot every config's values as JSON, or compare two snapshots.

    python tools/analysis/config_snapshot.py write configs before.json
    python tools/analysis/config_snapshot.py compare before.json after.json   # exit 1 on any difference

A snapshot maps each config path (relative to the folder given, ``_base_`` fragments left out) to its
``Config.fromfile(path).to_dict()`` as JSON, or to ``{"__error__": message}`` when it does not load. The configs'
``custom_imports`` are not imported: they register classes and change no value.
"""
import argparse
import glob
import json
import os.path as osp
import sys


def snapshot(root: str) -> dict:
    """``{relative path: to_dict() as JSON values}`` of every config under ``root`` outside ``_base_``."""
    from mmengine.config import Config
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


def _flat(value, prefix=''):
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
    """One line per config that is missing, added or differs (with the differing keys)."""
    lines = [f'{name}: missing' for name in sorted(set(before) - set(after))]
    lines += [f'{name}: added' for name in sorted(set(after) - set(before))]
    for name in sorted(set(before) & set(after)):
        a, b = _flat(before[name]), _flat(after[name])
        keys = sorted(k for k in set(a) | set(b) if a.get(k, '<absent>') != b.get(k, '<absent>'))
        if keys:
            lines.append(f'{name}: {len(keys)} keys differ: ' + ', '.join(
                f'{k} ({a.get(k, "<absent>")!r} -> {b.get(k, "<absent>")!r})' for k in keys[:20]))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='mode', required=True)
    write = sub.add_parser('write', help='snapshot every config under a folder into a JSON file')
    write.add_argument('root', help='the configs folder')
    write.add_argument('out', help='the JSON file to write')
    comp = sub.add_parser('compare', help='print the configs whose values differ; exit 1 if any')
    comp.add_argument('before')
    comp.add_argument('after', help='a snapshot JSON file or a configs folder to snapshot now')
    args = parser.parse_args(argv)
    if args.mode == 'write':
        shot = snapshot(args.root)
        with open(args.out, 'w') as f:
            json.dump(shot, f, sort_keys=True, indent=1)
        errors = [name for name, values in shot.items() if '__error__' in values]
        print(f'{len(shot)} configs written to {args.out}; {len(errors)} did not load: {errors}')
        return 0
    with open(args.before) as f:
        before = json.load(f)
    if osp.isdir(args.after):
        after = snapshot(args.after)
    else:
        with open(args.after) as f:
            after = json.load(f)
    lines = compare(before, after)
    print('\n'.join(lines + [f'{len(lines)} of {len(set(before) | set(after))} configs differ']))
    return 1 if lines else 0


if __name__ == '__main__':
    sys.exit(main())
