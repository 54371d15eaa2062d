"""Images/s of one DataLoader worker through each full-size recipe's train pipeline, and the workers per GPU that
feed a GPU rate (``beit_mm.benchmarks.data_pipeline``; docs/performance.md#data-loading).

    python tools/analysis/benchmark_data.py [--work-dir /tmp/beit_mm_data_bench] [--images 64]
        [--ade-size 592] [--imagenet-size 432] [--gpu-rate NAME=IMG_PER_S ...] [--out table.md [--overwrite]]

Demo sets in the real layouts are written under ``--work-dir`` (reused when there) by ``tools/make_demo_data.py``'s
generators at realistic sizes: 592^2 px ADE20K images (the pixels of a 683 x 512 ADE20K image) and 432^2 px
ImageNet images (the pixels of a 500 x 375 one), JPEG quality 90. ``--gpu-rate`` names a recipe by the start of its
name (e.g. ``--gpu-rate "ADE20K 512=40"``); defaults in ``RECIPES``.
"""
from __future__ import annotations

import argparse
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='/tmp/beit_mm_data_bench', help='where the demo sets are written')
    parser.add_argument('--images', type=int, default=64, help='timed images per recipe (after 4 warm-up)')
    parser.add_argument('--ade-size', type=int, default=592, help='ADE20K-like image side')
    parser.add_argument('--imagenet-size', type=int, default=432, help='ImageNet-like image side')
    parser.add_argument('--gpu-rate', nargs='+', default=[], metavar='NAME=IMG_PER_S',
                        help="a recipe's GPU images/s to feed (recipe named by the start of its name)")
    parser.add_argument('--out', help='also write the Markdown table to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from beit_mm.benchmarks.data_pipeline import (HEADROOM, MIN_WORKERS, RECIPES, build_train_dataset,
                                                  loader_settings, make_demo_sets, worker_rate, workers_needed)
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    from beit_mm.fileio.outputs import OutputError, atomic_file, check_output
    if args.out:
        try:
            check_output(args.out, args.overwrite)
        except OutputError as error:
            raise SystemExit(f'benchmark_data: {error}') from None
    rates = {r.name: r.gpu_rate for r in RECIPES}
    for item in args.gpu_rate:
        prefix, _, value = item.rpartition('=')
        matches = [name for name in rates if name.startswith(prefix)]
        if len(matches) != 1 or not prefix:
            raise SystemExit(f'--gpu-rate {item!r}: {prefix!r} names {len(matches)} recipes; use the start of one '
                             f'of {list(rates)}')
        rates[matches[0]] = float(value)
    roots = make_demo_sets(args.work_dir, args.ade_size, args.imagenet_size, args.images)
    lines = [f'CPU: {describe_cpu()}; one worker = one process at 1 thread; {args.images} images after 4 warm-up; '
             f'demo images {args.ade_size}^2 (ADE20K-like) and {args.imagenet_size}^2 (ImageNet-like) JPEG q90; '
             f'workers = max({MIN_WORKERS}, ceil({HEADROOM} x GPU rate / img/s per worker per CPU second)).', '',
             '| recipe | config | img/s per worker (per CPU s) | wall-clock img/s here | GPU img/s to feed | '
             'workers per GPU | train_dataloader keys |', '|---|---|---|---|---|---|---|']
    for recipe in RECIPES:
        dataset = build_train_dataset(osp.join(ROOT, recipe.config), roots[recipe.layout])
        rate, wall = worker_rate(dataset, args.images)
        need = workers_needed(rates[recipe.name], rate)
        keys = ', '.join(f'{k}={v}' for k, v in loader_settings(need).items())
        lines.append(f'| {recipe.name} | `{recipe.config}` | {rate:.1f} | {wall:.1f} | {rates[recipe.name]:g} | {need} | '
                     f'{keys} |')
        print(lines[-1], flush=True)
    table = '\n'.join(lines)
    print('\n' + table)
    if args.out:
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table + '\n')


if __name__ == '__main__':
    main()
