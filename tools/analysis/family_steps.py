"""One bf16 training step and one validation of one config of every model family, each in its own process with a
time limit, on random weights and synthetic data in the config's layout (``beit_mm.benchmarks.family_steps``).

    python tools/analysis/family_steps.py [--dry-run] [--families NAME ...] [--timeout 120] [--budget S]
        [--work-dir /tmp/beit_mm_family_steps] [--out table.md [--overwrite]]

Prints one line per family as it ends (family, config, ok or FAILED with the error's last line, the first and second
step's seconds, the validation's seconds, peak CUDA memory) and the Markdown table; exits 1 when a family failed.
``--dry-run`` runs each family's tiny demo config on 64-pixel images on the CPU in fp32 (what CI checks).
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import signal
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--dry-run', action='store_true', help='the demo configs, tiny, on the CPU, in fp32')
    parser.add_argument('--families', nargs='+', metavar='NAME', help='only these families (default: all)')
    parser.add_argument('--timeout', type=float, default=120, help='seconds each family may take')
    parser.add_argument('--budget', type=float, help='seconds all families may take together; the families left '
                        'when it is spent fail their rows unrun')
    parser.add_argument('--work-dir', default='/tmp/beit_mm_family_steps', help='synthetic data and run folders')
    parser.add_argument('--out', help='also write the Markdown table to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from beit_mm.benchmarks.family_steps import markdown, run_families, select
    from beit_mm.fileio.names import shown
    from beit_mm.fileio.outputs import OutputError, atomic_file, check_output
    if args.out:
        try:
            check_output(args.out, args.overwrite)
        except OutputError as error:
            raise SystemExit(str(error))
    try:
        families = select(args.families)
    except ValueError as error:
        raise SystemExit(f'--families: {error}')
    if args.dry_run:
        os.environ['CUDA_VISIBLE_DEVICES'] = ''  # the children see no GPU
        device_name = 'CPU (dry run: demo configs)'
    else:
        # nvidia-smi, not torch.cuda: CUDA initialized here would break the children's fork
        gpu = _gpu_name()
        if gpu is None:
            raise SystemExit('no GPU: family_steps.py runs the full-size configs on a GPU; --dry-run runs the demo '
                             'configs on the CPU')
        device_name = shown(gpu)
    # a SIGTERM (the session's `timeout`) exits through Python, which ends the running family's child too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    results = run_families(families, ROOT, args.work_dir, args.dry_run, amp=not args.dry_run, timeout=args.timeout,
                           budget=args.budget,
                           report=lambda text: print(text, flush=True),
                           log=lambda text: print(text, file=sys.stderr, flush=True))
    table = markdown(results, device_name, amp=not args.dry_run)
    print(table)
    if args.out:
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table)
    sys.exit(0 if all(r.ok for r in results) else 1)


def _gpu_name() -> str | None:
    """The first GPU's name as nvidia-smi gives it, or None without one."""
    import subprocess
    try:
        out = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[0] if out else None


if __name__ == '__main__':
    main()
