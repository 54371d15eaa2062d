"""The three segmentation heads on one dataset, over seeds, at the same iterations: UPerNet, Mask2Former and EoMT on the
same tiny BEiT (issue 28's head table; ``docs/heads.md``).

    python tools/analysis/head_study.py --data-root data/ade_demo --seeds 0 1 2 --work-dir work_dirs/head_demo

Each head's demo config -- ``configs/beit/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py``,
``configs/mask2former/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py``,
``configs/eomt/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py``: the same backbone, data pipeline, optimizer, schedule
and 1000 iterations at batch 8, from scratch -- runs through ``tools/train.py`` in a subprocess on the config written to
the run's folder (``study_config.py``: ``randomness.seed=S``, the data roots = ``--data-root`` and, with ``--iters``,
every iteration count rescaled: :func:`run_config`), one run at a time (each uses every core). Its metrics are those of its last validation (at the last iteration). A finished run (its
``metrics.json``, with the settings it ran with) is reused; one with other settings stops the study.

Report (printed, ``report.md`` and ``report.json`` in the work dir): per head, mIoU / aAcc / mAcc as mean ± sample std
over seeds and per seed, next to the majority class (the training set's most frequent class predicted everywhere on
the validation set) and the wall time of each run. Speed and FLOPs of the same models: ``benchmark.py --parts
heads-demo headsinf-demo`` and ``get_flops.py`` (docs/heads.md).
"""
from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import sys

HERE = osp.dirname(osp.abspath(__file__))
ROOT = osp.dirname(osp.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from mim_study import cached, fmt, last_value, majority_baseline, rescale_iterations, train  # noqa: E402

HEADS = {
    'upernet': 'configs/beit/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py',
    'mask2former': 'configs/mask2former/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py',
    'eomt': 'configs/eomt/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py',
}
METRICS = ('mIoU', 'aAcc', 'mAcc')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--data-root', default='data/ade_demo', help='ADE20K-layout root (the demo data by default)')
    parser.add_argument('--heads', nargs='+', choices=sorted(HEADS), default=list(HEADS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2], help='>= 3 for stds')
    parser.add_argument('--iters', type=int, default=None,
                        help='training iterations of every run (default: the configs\' own, 1000); validation at the '
                        'last one')
    parser.add_argument('--work-dir', default='work_dirs/head_demo')
    return parser.parse_args(argv)


def run_options(args: argparse.Namespace, seed: int) -> list[str]:
    opts = [f'randomness.seed={seed}']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        opts.append(f'{loader}.dataset.data_root={osp.abspath(args.data_root)}')
    return opts


def run_config(args: argparse.Namespace, head: str, seed: int):
    """The head's demo config as its run trains it: ``run_options`` applied and, with ``--iters``, every iteration
    count rescaled (``mim_study.rescale_iterations``: the poly schedule's end, EoMT's mask-annealing steps, validation,
    checkpoint and logger intervals), so that a shorter run ends its lr decay and its annealing as the full one does."""
    from mmengine.config import Config, DictAction
    cfg = Config.fromfile(osp.join(ROOT, HEADS[head]))
    parser = argparse.ArgumentParser()
    parser.add_argument('--opts', nargs='+', action=DictAction)
    cfg.merge_from_dict(parser.parse_args(['--opts', *run_options(args, seed)]).opts)
    if args.iters is not None:
        rescale_iterations(cfg, args.iters)
        cfg.train_cfg.val_interval = args.iters  # validation at the last iteration, whose metrics are reported
    return cfg


def run_head(args: argparse.Namespace, head: str, seed: int) -> dict:
    work = osp.join(args.work_dir, head, f'seed{seed}')
    settings = dict(config=HEADS[head], data_root=osp.abspath(args.data_root), iters=args.iters, seed=seed)

    def run() -> dict:
        from beit_mm.fileio.outputs import atomic_file
        os.makedirs(work, exist_ok=True)
        config = osp.join(work, 'study_config.py')
        with atomic_file(config) as tmp, open(tmp, 'w') as f:
            f.write(run_config(args, head, seed).pretty_text)
        log = train(config, work, [])
        return {k: last_value(log, k) for k in METRICS}
    return cached(work, run, settings)  # adds the run's 'seconds' and 'settings'


def baseline(args: argparse.Namespace) -> dict:
    """The majority class of the UPerNet demo config's training split, everywhere on its validation split."""
    from mmengine.config import Config
    from mmseg.registry import DATASETS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(osp.join(ROOT, HEADS['upernet']))
    sets = []
    for loader in ('train_dataloader', 'val_dataloader'):
        ds = cfg[loader].dataset.copy()
        ds.update(data_root=osp.abspath(args.data_root), pipeline=[], lazy_init=False)
        sets.append(DATASETS.build(ds))
    return majority_baseline(*sets)


def report(args: argparse.Namespace, results: dict, base: dict) -> str:
    iters = args.iters or 1000
    lines = [f'# Heads on {args.data_root}: {iters} iterations each, seeds {args.seeds}', '',
             'Mean ± sample std over seeds of the last validation (tools/analysis/head_study.py); same tiny BEiT, '
             'data, optimizer and schedule for every head, from scratch.', '',
             '| head | mIoU | mIoU per seed | aAcc | mAcc | minutes per run |', '|---|---|---|---|---|---|',
             f'| trivial baseline (majority class) | {base["mIoU"]:.2f} | - | {base["aAcc"]:.2f} | {base["mAcc"]:.2f} '
             '| - |']
    for head, runs in results.items():
        per_seed = ', '.join(f'{r["mIoU"]:.2f}' for r in runs)
        lines.append(f'| {head} | {fmt([r["mIoU"] for r in runs])} | {per_seed} | {fmt([r["aAcc"] for r in runs])} '
                     f'| {fmt([r["mAcc"] for r in runs])} | {fmt([r["seconds"] / 60 for r in runs])} |')
    return '\n'.join(lines) + '\n'


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if not osp.isdir(osp.join(args.data_root, 'images', 'training')):
        raise SystemExit(f'head_study: {args.data_root} has no images/training; make the demo data with '
                         'bash tools/run_demo.sh (or tools/make_demo_data.py), or pass --data-root')
    from beit_mm.fileio.outputs import OutputError, check_output
    try:  # a folder of runs the study reuses: it may exist, never be a link or lie in the data
        check_output(args.work_dir, overwrite=True, kind='dir', inputs=[args.data_root])
    except OutputError as error:
        raise SystemExit(f'head_study: {error}') from None
    os.makedirs(args.work_dir, exist_ok=True)
    base = baseline(args)
    results = {head: [run_head(args, head, s) for s in args.seeds] for head in args.heads}
    text = report(args, results, base)
    from beit_mm.fileio.outputs import atomic_file
    with atomic_file(osp.join(args.work_dir, 'report.md')) as tmp, open(tmp, 'w') as f:
        f.write(text)
    with atomic_file(osp.join(args.work_dir, 'report.json')) as tmp, open(tmp, 'w') as f:
        json.dump(dict(baseline=base, results=results, seeds=args.seeds, iters=args.iters), f, indent=1)
    print(text)
    return dict(baseline=base, results=results)


if __name__ == '__main__':
    main()
