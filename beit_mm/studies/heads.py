"""The head study: UPerNet, ViT-Adapter + UPerNet, Mask2Former, ViT-Adapter + Mask2Former and EoMT on the same tiny
BEiT, data, optimizer and schedule, from scratch, over seeds at the same iterations, next to the majority class.

Each head's demo config trains in a child process (:func:`beit_mm.studies.runs.train`) on the config written to its
run's folder, one run at a time; its metrics are those of its last validation. A finished run is reused
(:func:`beit_mm.studies.runs.cached`); one with other settings stops the study.
"""
from __future__ import annotations

import json
import os
import os.path as osp

from mmengine.config import Config

from beit_mm.fileio.work_dir import check_replaceable, write_work_dir_file

from .configs import rescale_iterations, shipped_config
from .report import fmt, majority_baseline
from .runs import cached, cfg_options, last_scalar, train
from .settings import HeadStudySettings

REPORTS = ('report.md', 'report.json')  # what a study writes into its work dir

HEADS = {  # relative to the config folder's parent (the settings' config_dir is that folder)
    'upernet': 'configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py',
    'vit-adapter-upernet': 'configs/demo/beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py',
    'mask2former': 'configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py',
    'vit-adapter-mask2former': 'configs/demo/mask2former_beit-adapter-tiny_1xb8-1k_ade20k-demo-64x64.py',
    'eomt': 'configs/demo/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py',
}
METRICS = ('mIoU', 'aAcc', 'mAcc')
DEMO_ITERS = 1000  # the demo configs' own max_iters (what the report says without --iters)


def head_config(args: HeadStudySettings, head: str) -> str:
    """The shipped demo config of ``head`` in ``args.config_dir``."""
    return shipped_config(args.config_dir, osp.relpath(HEADS[head], 'configs'))


def run_options(args: HeadStudySettings, seed: int) -> list[str]:
    """The ``--cfg-options`` of a run: its seed and the data roots."""
    opts = [f'randomness.seed={seed}']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        opts.append(f'{loader}.dataset.data_root={args.data_root}')
    return opts


def run_config(args: HeadStudySettings, head: str, seed: int) -> Config:
    """The head's demo config as its run trains it: :func:`run_options` applied and, with ``args.iters``, every
    iteration count rescaled (:func:`beit_mm.studies.configs.rescale_iterations`: the poly schedule's end, EoMT's
    mask-annealing steps, validation, checkpoint and logger intervals), so that a shorter run ends its lr decay and
    its annealing as the full one does; validation at the last iteration."""
    cfg = Config.fromfile(head_config(args, head))
    cfg.merge_from_dict(cfg_options(run_options(args, seed)))
    if args.iters is not None:
        rescale_iterations(cfg, args.iters)
        cfg.train_cfg.val_interval = args.iters  # validation at the last iteration, whose metrics are reported
    return cfg


def run_head(args: HeadStudySettings, head: str, seed: int) -> dict:
    """One head and seed: its last validation's :data:`METRICS`, its ``seconds`` and ``settings`` (cached)."""
    work = osp.join(args.work_dir, head, f'seed{seed}')
    settings = dict(config=HEADS[head], data_root=args.data_root, iters=args.iters, seed=seed)

    def run() -> dict:
        os.makedirs(work, exist_ok=True)
        config = osp.join(work, 'study_config.py')
        # the study's file, listed in the work dir's manifest: MMEngine's config dump may replace it (the same text)
        write_work_dir_file(work, osp.basename(config), run_config(args, head, seed).pretty_text)
        train(config, work, [])
        return {k: last_scalar(work, k) for k in METRICS}
    return cached(work, run, settings)


def baseline(args: HeadStudySettings) -> dict:
    """The majority class of the UPerNet demo config's training split, everywhere on its validation split."""
    from mmseg.registry import DATASETS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(head_config(args, 'upernet'))
    sets = []
    for loader in ('train_dataloader', 'val_dataloader'):
        ds = cfg[loader].dataset.copy()
        ds.update(data_root=args.data_root, pipeline=[], lazy_init=False)
        sets.append(DATASETS.build(ds))
    return majority_baseline(*sets)


def head_report(args: HeadStudySettings, results: dict, base: dict) -> str:
    """Per head: mIoU / aAcc / mAcc as mean ± sample std over seeds and mIoU per seed, next to the majority class,
    and the minutes per run (Markdown)."""
    iters = args.iters or DEMO_ITERS
    lines = [f'# Heads on {args.data_root}: {iters} iterations each, seeds {args.seeds}', '',
             'Mean ± sample std over seeds of the last validation (tools/analysis/head_study.py); same tiny BEiT '
             '(8 px patches, 16 px under ViT-Adapter), data, optimizer and schedule for every head, from scratch.', '',
             '| head | mIoU | mIoU per seed | aAcc | mAcc | minutes per run |', '|---|---|---|---|---|---|',
             f'| trivial baseline (majority class) | {base["mIoU"]:.2f} | - | {base["aAcc"]:.2f} | {base["mAcc"]:.2f} '
             '| - |']
    for head, runs in results.items():
        per_seed = ', '.join(f'{r["mIoU"]:.2f}' for r in runs)
        lines.append(f'| {head} | {fmt([r["mIoU"] for r in runs])} | {per_seed} | {fmt([r["aAcc"] for r in runs])} '
                     f'| {fmt([r["mAcc"] for r in runs])} | {fmt([r["seconds"] / 60 for r in runs])} |')
    return '\n'.join(lines) + '\n'


def run_study(args: HeadStudySettings) -> dict:
    """Every head and seed of ``args`` (the work dir checked by the caller), the baseline and the report
    (``report.md``, ``report.json`` in the work dir); returns ``dict(baseline, results={head: [run per seed]},
    text)``."""
    os.makedirs(args.work_dir, exist_ok=True)
    for name in REPORTS:  # before any run: a user's file of that name is never replaced
        check_replaceable(args.work_dir, name)
    base = baseline(args)
    results = {head: [run_head(args, head, s) for s in args.seeds] for head in args.heads}
    text = head_report(args, results, base)
    write_work_dir_file(args.work_dir, 'report.md', text)
    write_work_dir_file(args.work_dir, 'report.json', json.dumps(
        dict(baseline=base, results=results, seeds=args.seeds, iters=args.iters), indent=1))
    return dict(baseline=base, results=results, text=text)
