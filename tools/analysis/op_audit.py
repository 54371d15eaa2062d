"""The compiled mmcv/torchvision ops each model family calls, and the devices this install has kernels for.

    python tools/analysis/op_audit.py [--families 'UPerNet' 'Mask2Former semantic' ...] [--data-dir DIR]

Runs one training and one test step of each family's demo config on CPU (``beit_mm.benchmarks.op_audit``), prints
the Markdown table, then each (family, op, device) with no kernel; exits 1 when there is one.
"""
from __future__ import annotations

import argparse
import os.path as osp
import sys
import tempfile

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--families', nargs='+', help='families to audit (default: all; names as the table\'s)')
    parser.add_argument('--data-dir', help='where the tiny demo sets are written (default: a temporary folder)')
    args = parser.parse_args()

    from beit_mm.benchmarks.op_audit import FAMILIES, audit, make_audit_data, markdown_table, missing_kernels
    unknown = sorted(set(args.families or ()) - set(FAMILIES))
    if unknown:
        parser.error(f'unknown families {unknown}; choose from {sorted(FAMILIES)}')
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = make_audit_data(args.data_dir or tmp)
        found = audit(ROOT, data_dir, {f: FAMILIES[f] for f in args.families or FAMILIES})
    print(markdown_table(found))
    missing = missing_kernels(found)
    for family, op, device in missing:
        print(f'{family}: {op} has no {device} kernel in this install', file=sys.stderr)
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
