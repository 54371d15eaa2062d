"""The segmentation heads on one dataset, over seeds, at the same iterations: UPerNet, ViT-Adapter + UPerNet,
Mask2Former, ViT-Adapter + Mask2Former and EoMT on the same tiny BEiT (the head tables of issues 28 and 41;
``docs/heads.md``). A thin CLI over ``beit_mm.studies.heads``.

    python tools/analysis/head_study.py --data-root data/ade_demo --seeds 0 1 2 --work-dir work_dirs/head_demo

Each head's demo config (``beit_mm.studies.heads.HEADS``: the same backbone (16 px patches under ViT-Adapter), data
pipeline, optimizer, schedule and 1000 iterations at batch 8, from scratch) trains (``beit_mm.apis.train.train`` in
a child process) on the config written to the run's folder (``study_config.py``: the seed, the data roots and, with
``--iters``, every iteration count rescaled), one run at a time. A finished run (its ``metrics.json``) is reused; one
with other settings stops the study.

Report (printed, ``report.md`` and ``report.json`` in the work dir): per head, mIoU / aAcc / mAcc as mean ± sample std
over seeds and per seed, next to the majority class and the wall time of each run. Speed and FLOPs of the same models:
``benchmark.py --parts heads-demo headsinf-demo`` and ``get_flops.py`` (docs/heads.md).
"""
from __future__ import annotations

import argparse
import os.path as osp

from beit_mm.fileio.names import refusal
from beit_mm.fileio.outputs import OutputError, check_output
from beit_mm.studies.heads import HEADS, run_study
from beit_mm.studies.settings import HeadStudySettings


def parse_args(argv: list[str] | None = None) -> HeadStudySettings:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--data-root', default='data/ade_demo', help='ADE20K-layout root (the demo data by default)')
    parser.add_argument('--heads', nargs='+', choices=sorted(HEADS), default=list(HEADS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2], help='>= 3 for stds')
    parser.add_argument('--iters', type=int, default=None,
                        help='training iterations of every run (default: the configs\' own, 1000); validation at the '
                        'last one')
    parser.add_argument('--work-dir', default='work_dirs/head_demo')
    return HeadStudySettings(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> dict:
    settings = parse_args(argv)
    if not osp.isdir(osp.join(settings.data_root, 'images', 'training')):
        raise refusal('head_study.py', f'{settings.data_root} has no images/training; make the demo data with bash '
                      'tools/run_demo.sh (or tools/make_demo_data.py), or pass --data-root')
    try:  # a folder of runs the study reuses: it may exist, never be a link or lie in the data
        check_output(settings.work_dir, overwrite=True, kind='dir', inputs=[settings.data_root])
    except OutputError as error:
        raise refusal('head_study.py', error) from None
    out = run_study(settings)
    print(out['text'])
    return dict(baseline=out['baseline'], results=out['results'])


if __name__ == '__main__':
    main()
