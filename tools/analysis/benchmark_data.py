"""Images/s of one DataLoader worker through each full-size recipe's train pipeline, the exact (reference) pipeline
next to the one the config trains with, and the workers per GPU that feed a GPU rate
(``beit_mm.benchmarks.data_pipeline``; docs/performance.md#data-loading).

    python tools/analysis/benchmark_data.py [--work-dir /tmp/beit_mm_data_bench] [--images 64]
        [--ade-size 592] [--imagenet-size 375 500] [--gpu-rate NAME=IMG_PER_S ...] [--out table.md [--overwrite]]

The images are written under ``--work-dir`` (reused when there): 592^2 px ADE20K images from
``tools/make_demo_data.py``'s generator (the pixels of a 683 x 512 ADE20K image) and photo-like 375 x 500 px
ImageNet JPEGs (1/f spectrum, quality 90: they decode as slowly as photographs do). ``--gpu-rate`` names a recipe by
the start of its name (e.g. ``--gpu-rate "BEiT v2=1400"``); defaults in ``RECIPES``.
"""
from __future__ import annotations

import argparse
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='/tmp/beit_mm_data_bench', help='where the image sets are written')
    parser.add_argument('--images', type=int, default=64, help='timed images per pipeline (after 4 warm-up)')
    parser.add_argument('--ade-size', type=int, default=592, help='ADE20K-like image side')
    parser.add_argument('--imagenet-size', type=int, nargs=2, default=(375, 500), metavar=('H', 'W'),
                        help='ImageNet-like image height and width')
    parser.add_argument('--gpu-rate', nargs='+', default=[], metavar='NAME=IMG_PER_S',
                        help="a recipe's GPU images/s to feed (recipe named by the start of its name)")
    parser.add_argument('--recipes', nargs='+', default=[], metavar='NAME',
                        help='time only the recipes whose names start with these')
    parser.add_argument('--out', help='also write the Markdown table to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from beit_mm.benchmarks.data_pipeline import (HEADROOM, MIN_WORKERS, NODE_WORKERS, RECIPES, loader_settings,
                                                  make_image_sets, measure_recipe)
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
    recipes = [r for r in RECIPES if not args.recipes or r.name.startswith(tuple(args.recipes))]
    roots = make_image_sets(args.work_dir, args.ade_size, tuple(args.imagenet_size), args.images)
    lines = [f'CPU: {describe_cpu()}; one worker = one process at 1 thread; {args.images} images per pipeline after '
             f'4 warm-up; ADE20K-like {args.ade_size}^2 px, photo-like ImageNet {args.imagenet_size[0]} x '
             f'{args.imagenet_size[1]} px JPEGs (q90); workers = max({MIN_WORKERS}, ceil({HEADROOM} x GPU rate / '
             f'img/s per worker CPU second)); a node gives {NODE_WORKERS} workers per GPU.', '',
             '| recipe | reference img/s per worker CPU s | new img/s per worker CPU s | ratio | with the data '
             'preprocessor on the CPU: reference / new (ratio) | wall-clock here: reference / new | GPU img/s to feed '
             f'| workers per GPU: reference / new | new fed by {NODE_WORKERS} workers | train_dataloader keys |',
             '|---|---|---|---|---|---|---|---|---|---|']
    gpu_lines = ['', 'GPU decode (train_pipeline_gpu_decode: the worker reads the bytes and draws; the data '
                 'preprocessor decodes, crops, resizes, flips and augments, timed here on the CPU, not on a GPU):', '',
                 '| recipe | GPU-decode img/s per worker CPU s | vs new | workers per GPU | preprocessor on the CPU: '
                 'ms per image (img/s) |', '|---|---|---|---|---|']
    for recipe in recipes:
        m = measure_recipe(recipe, osp.join(ROOT, recipe.config), roots[recipe.layout], args.images,
                           rates[recipe.name])
        keys = ', '.join(f'{k}={v}' for k, v in loader_settings(m.workers_new).items())
        fed = 'yes' if m.workers_new <= NODE_WORKERS else f'no ({NODE_WORKERS * m.new / HEADROOM:.0f} img/s)'
        lines.append(f'| {recipe.name} | {m.reference:.1f} | {m.new:.1f} | x{m.ratio:.2f} | '
                     f'{m.reference_with_preprocessor:.1f} / {m.new_with_preprocessor:.1f} '
                     f'(x{m.ratio_with_preprocessor:.2f}) | {m.reference_wall:.1f} / {m.new_wall:.1f} | '
                     f'{m.gpu_rate:g} | {m.workers_reference} / {m.workers_new} | {fed} | {keys} |')
        print(lines[-1], flush=True)
        if m.gpu_decode is not None:
            gpu_lines.append(f'| {recipe.name} | {m.gpu_decode:.1f} | x{m.gpu_decode / m.new:.2f} | '
                             f'{m.workers_gpu_decode} | {1e3 * m.gpu_decode_preprocessor_seconds:.1f} '
                             f'({1 / m.gpu_decode_preprocessor_seconds:.1f}) |')
            print(gpu_lines[-1], flush=True)
    table = '\n'.join(lines + (gpu_lines if len(gpu_lines) > 5 else []))
    print('\n' + table)
    if args.out:
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table + '\n')


if __name__ == '__main__':
    main()
