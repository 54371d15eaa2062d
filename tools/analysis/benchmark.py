"""End-to-end train/inference steps of beit_mm next to its peers, in one process, alternating, same dtype and batch,
with each row's model FLOPs, achieved TFLOP/s and MFU.

    python tools/analysis/benchmark.py [--parts mim mim-tokamp mim2 finetune seg512 seg640 slide640 eomt512] [--amp]
                                       [--compile] [--device cuda] [--batch-size N] [--iters N] [--rounds N]
                                       [--profile 15] [--attn-impls sdpa flex] [--out table.md [--overwrite]]
    python tools/analysis/benchmark.py --parts backbone --model cvt       # backbone-only train step, CvT-13 vs HF

The parts and their peers (mmpretrain, mmseg, timm where installed) are described in ``beit_mm.benchmarks.parts``;
how a step is timed, compiled and split in ``beit_mm.benchmarks.measure``; MFU in ``beit_mm.benchmarks.mfu``
(docs/performance.md#mfu). Defaults: on CUDA each part at its recipe's batch per GPU
(``beit_mm.benchmarks.parts.RECIPE_BATCH``: MIM 256, fine-tuning 128, UPerNet 512 / 640 at 16 / 8, EoMT 16; an
out-of-memory step halves it, and the row says so), 50 timed steps after 5 warm-up, 1 round; on CPU batch 2 (1 for
segmentation), 2 timed steps after 1, 3 rounds. ``--compile`` adds a ``torch.compile`` row next to each of
beit_mm's eager rows (``--compile-peers``: next to the peers' too; compiling costs a minute or more per model).
``--amp`` autocasts forward and loss with the dtype ``tools/train.py --amp`` picks for the device. Nothing here is
asserted by tests.
"""
from __future__ import annotations

import argparse
import os.path as osp
import sys

import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--parts', nargs='+', default=['mim', 'mim2', 'finetune', 'seg512', 'seg640', 'slide640'],
                        help='mim, mim-tokamp, mim2, finetune, seg<SIZE>, slide<SIZE>, eomt<SIZE>, heads<SIZE>, '
                        'headsinf<SIZE> (SIZE a multiple of 16), eomt-demo, heads-demo, headsinf-demo, heads-study, '
                        'headsinf-study, backbone')
    parser.add_argument('--model', choices=['beit', 'cvt'], default='beit', help='for --parts backbone')
    parser.add_argument('--img-size', type=int, default=224, help='for --parts backbone')
    parser.add_argument('--amp', action='store_true', help="autocast with tools/train.py --amp's dtype")
    parser.add_argument('--compile', action='store_true',
                        help="also time beit_mm's models under torch.compile (the peers too with --compile-peers)")
    parser.add_argument('--compile-peers', action='store_true', help='with --compile: compile the peers as well')
    parser.add_argument('--batch-size', type=int, default=None,
                        help='images per step for every part (default: the recipe batch per GPU on CUDA; CPU 2, '
                        'segmentation 1)')
    parser.add_argument('--iters', type=int, default=None, help='timed steps per model and round (CUDA 50, CPU 2)')
    parser.add_argument('--warmup', type=int, default=None, help='untimed steps first (CUDA 5, CPU 1; compiled >= 3)')
    parser.add_argument('--rounds', type=int, default=None,
                        help='alternations of the models; medians are reported (CUDA 1, CPU 3)')
    parser.add_argument('--no-split', dest='split', action='store_false', help='skip the per-part time split')
    parser.add_argument('--profile', type=int, default=0, metavar='N',
                        help="print torch.profiler's top-N ops of eager rows, and every row's device time by kernel "
                        'category (matmul, attention, elementwise, optimizer, other)')
    parser.add_argument('--attn-impls', nargs='+', default=None, metavar='IMPL',
                        help="one row per attention kernel for beit_mm's models (e.g. sdpa flex); default: the "
                        "configs' own")
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--out', help='also write the Markdown tables to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
    return parser.parse_args()


def describe_device(device: torch.device) -> str:
    if device.type == 'cuda':
        return f'{torch.cuda.get_device_name(device)}, torch {torch.__version__}'
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    return f'{describe_cpu()}, torch {torch.__version__}'


def main() -> None:
    args = parse_args()
    import beit_mm  # noqa: F401  (registers the plugin)
    from mmengine.logging import MMLogger

    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError, check_output
    if args.out:
        try:
            check_output(args.out, args.overwrite)  # at start, not after minutes of timing
        except OutputError as error:
            raise refusal('benchmark.py', error) from None
    from beit_mm.benchmarks.measure import Timing, run_part, with_attention_variants
    from beit_mm.benchmarks.parts import default_batch, make_part
    from beit_mm.benchmarks.report import describe_peak, markdown
    from beit_mm.engine.amp_optim_wrapper import amp_dtype_for_device
    from beit_mm.benchmarks.mfu import device_peak, peak_kind
    MMLogger.get_instance('benchmark', log_level='WARNING')
    MMLogger.get_current_instance().setLevel('WARNING')
    device = torch.device(args.device)
    cuda = device.type == 'cuda'
    timing = Timing(iters=args.iters or (50 if cuda else 2), warmup=args.warmup if args.warmup is not None else
                    (5 if cuda else 1), rounds=args.rounds or (1 if cuda else 3), split=args.split,
                    profile=args.profile, categories=args.profile > 0)
    dtype = amp_dtype_for_device(device.type) if args.amp else None
    modes = ('eager', 'compiled') if args.compile else ('eager', )
    results = []
    for name in args.parts:
        part = make_part(name, ROOT, dtype, model=args.model, img_size=args.img_size)
        if args.attn_impls:
            part = with_attention_variants(part, args.attn_impls)
        batch = args.batch_size or default_batch(name, device.type)
        print(f'{part.title}: batch {batch}', file=sys.stderr, flush=True)
        res = run_part(part, timing, device, dtype, batch, modes, compile_peers=args.compile_peers)
        results.append((part, res))
        for (model, mode), r in res['rows'].items():
            if r['profile']:
                print(f'\n### {part.title}: {model} profile\n\n```\n{r["profile"]}\n```\n')
    kind = peak_kind(dtype, torch.get_float32_matmul_precision())
    device_name = torch.cuda.get_device_name(device) if cuda else 'CPU'
    peak = device_peak(device_name, kind) if cuda else None
    dtype_name = str(dtype).replace('torch.', '') + ' autocast' if dtype is not None else 'float32'
    header = (f'Device: {describe_device(device)}; dtype {dtype_name}; {timing.iters} timed steps after '
              f'{timing.warmup} warm-up, median of {timing.rounds} alternating rounds. '
              f'{describe_peak(device, device_name, kind, peak)}')
    table = markdown(results, header, peak)
    print(table)
    if args.out:  # through a temporary file and a rename: a kill leaves the old table or the new one
        from beit_mm.fileio.outputs import atomic_file
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table + '\n')


if __name__ == '__main__':
    main()
