"""Images/s of one DataLoader worker through each full-size recipe's train pipeline, the exact (reference) pipeline
next to the one the config trains with, and the workers per GPU that feed a GPU rate
(``beit_mm.benchmarks.data_pipeline``; docs/performance.md#data-loading).

    python tools/analysis/benchmark_data.py [--work-dir /tmp/beit_mm_data_bench] [--images 64]
        [--ade-size 592] [--imagenet-size 375 500] [--gpu-rate NAME=IMG_PER_S ...] [--recipes NAME ...]
        [--device cuda [--device-batch N] [--device-batches 3] [--loader-workers 13] [--kinds new gpu_decode]]
        [--out table.md [--overwrite]]

The images are written under ``--work-dir`` (reused when there): 592^2 px ADE20K images from
``tools/make_demo_data.py``'s generator (the pixels of a 683 x 512 ADE20K image) and photo-like 375 x 500 px
ImageNet JPEGs (1/f spectrum, quality 90: they decode as slowly as photographs do). ``--gpu-rate`` names a recipe by
the start of its name (e.g. ``--gpu-rate "BEiT v2=1400"``); defaults in ``RECIPES``.

``--device`` adds a second table: each pipeline's data preprocessor timed on that device at the recipe's batch
(``--device-batch``: another), the batched JPEG decode of the GPU-decode pipeline on its own, the share of the step
at the GPU rate, and with ``--loader-workers N`` the images/s MMEngine's DataLoader with N workers delivers through the
preprocessor there (a node gives 13 per GPU).
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
    parser.add_argument('--device', help="also time the data preprocessors on this device (e.g. 'cuda')")
    parser.add_argument('--device-batch', type=int, help="batch on --device (default: each config's batch size)")
    parser.add_argument('--device-batches', type=int, default=3, help='timed batches on --device (after one)')
    parser.add_argument('--loader-workers', type=int, default=0,
                        help='with --device: also time a DataLoader with this many workers through the preprocessor')
    parser.add_argument('--kinds', nargs='+', choices=('reference', 'new', 'gpu_decode'),
                        help='with --device: only these pipelines (default: every one a config has)')
    parser.add_argument('--out', help='also write the Markdown table(s) to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from beit_mm.benchmarks.data_pipeline import (HEADROOM, MIN_WORKERS, NODE_WORKERS, RECIPES, loader_settings,
                                                  make_image_sets, measure_recipe)
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError, atomic_file, check_output
    if args.out:
        try:
            check_output(args.out, args.overwrite)
        except OutputError as error:
            raise refusal('benchmark_data.py', error) from None
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
    tables = lines + (gpu_lines if len(gpu_lines) > 5 else [])
    if args.device:
        tables += device_table(args, recipes, rates, roots)
    table = '\n'.join(tables)
    print('\n' + table)
    if args.out:
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table + '\n')


def device_table(args: argparse.Namespace, recipes: list, rates: dict, roots: dict) -> list[str]:
    """The ``--device`` table's lines, each row printed as it is measured."""
    import torch

    from beit_mm.benchmarks.data_pipeline import NODE_WORKERS, measure_on_device
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else describe_cpu()
    workers = args.loader_workers
    lines = ['', f'On the device ({name}, torch {torch.__version__}): the data preprocessor per batch, the device '
             f'synchronised; the step per batch at the GPU rate; the DataLoader with {workers or "no"} workers '
             f'through the preprocessor (a node gives {NODE_WORKERS} per GPU):', '',
             '| recipe | pipeline | batch | preprocessor ms per batch | of which JPEG decode ms | step ms per batch at '
             'the GPU rate | GPU img/s with the preprocessor before each step | DataLoader + preprocessor img/s | '
             'feeds the GPU rate |', '|---|---|---|---|---|---|---|---|---|']
    for recipe in recipes:
        for m in measure_on_device(recipe, osp.join(ROOT, recipe.config), roots[recipe.layout], device,
                                   rates[recipe.name], args.device_batch, args.device_batches, workers,
                                   tuple(args.kinds) if args.kinds else None):
            decode = '-' if m.decode_seconds is None else f'{1e3 * m.decode_seconds:.1f}'
            loader = '-' if m.loader_rate is None else f'{m.loader_rate:.0f}'
            feeds = '-' if m.loader_rate is None else ('yes' if m.loader_rate >= m.rate_with_preprocessor else 'no')
            lines.append(f'| {recipe.name} | {m.kind} | {m.batch} | {1e3 * m.preprocessor_seconds:.1f} | {decode} | '
                         f'{1e3 * m.step_seconds:.1f} | {m.rate_with_preprocessor:.0f} | {loader} | {feeds} |')
            print(lines[-1], flush=True)
    return lines


if __name__ == '__main__':
    main()
