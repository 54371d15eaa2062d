"""Snapshot every config's values as JSON, or compare two snapshots.

    python tools/analysis/config_snapshot.py write configs before.json
    python tools/analysis/config_snapshot.py compare before.json after.json   # exit 1 on any difference
    python tools/analysis/config_snapshot.py compare before.json configs      # against the configs as they are now

A snapshot maps each config path (relative to the folder given, ``_base_`` fragments left out) to its
``Config.fromfile(path).to_dict()`` as JSON, or to ``{"__error__": message}`` when it does not load.
"""
import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='mode', required=True)
    write = sub.add_parser('write', help='snapshot every config under a folder into a JSON file')
    write.add_argument('root', help='the configs folder')
    write.add_argument('out', help='the JSON file to write')
    write.add_argument('--overwrite', action='store_true', help='replace an existing snapshot file')
    comp = sub.add_parser('compare', help='print the configs whose values differ; exit 1 if any')
    comp.add_argument('before', help='a snapshot JSON file or a configs folder')
    comp.add_argument('after', help='a snapshot JSON file or a configs folder to snapshot now')
    args = parser.parse_args(argv)
    from beit_mm.apis.config_snapshot import compare, load_snapshot, write_snapshot
    if args.mode == 'write':
        shot = write_snapshot(args.root, args.out, args.overwrite)
        errors = [name for name, values in shot.items() if '__error__' in values]
        print(f'{len(shot)} configs written to {args.out}; {len(errors)} did not load: {errors}')
        return 0
    before, after = load_snapshot(args.before), load_snapshot(args.after)
    lines = compare(before, after)
    print('\n'.join(lines + [f'{len(lines)} of {len(set(before) | set(after))} configs differ']))
    return 1 if lines else 0


if __name__ == '__main__':
    sys.exit(main())
