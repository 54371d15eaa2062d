"""Does BEiT pretraining help when labels are scarce? The study a user runs before trusting beit_mm's MIM (a thin CLI
over ``beit_mm.studies.mim``; the protocol, what it reports and how to read it: docs/pretraining.md).

    python tools/analysis/mim_study.py --labeled-root data/shapes --unlabeled-root data/shapes_unlabeled \
        --num-classes 7 [--num-labeled N] [--seeds 0 1 2] [--jobs 2] [--arms ...] [--heads linear upernet ...]
        [--work-dir work_dirs/mim_study]   (every option: --help)

Writes ``report.md``, ``report.json`` and ``probe_curves.png`` to the work dir and prints the report, which ends with
one ``recommendation: start from ...`` line. Finished runs in the work dir are reused; a cut run resumes.
"""
from __future__ import annotations

import argparse
import os.path as osp

from beit_mm.evaluation.probe import LabeledDataError
from beit_mm.fileio.outputs import OutputError
from beit_mm.studies.configs import ARMS, FT_CONFIGS, MIM_CONFIGS
from beit_mm.studies.mim import run_study


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='MIM pretraining vs scratch (and its ablations) with few labels')
    parser.add_argument('--labeled-root', required=True, help='ADE20K-layout root with raw labels 1..K')
    parser.add_argument('--unlabeled-root', required=True, help='root whose images/training holds the unlabeled pool')
    parser.add_argument('--num-classes', type=int, required=True, help='K: raw label ids 1..K are the classes')
    parser.add_argument('--num-labeled', type=int, default=None,
                        help='fine-tune and probe on the first N labeled training images (default: all)')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2], help='fine-tuning seeds (>= 3 for stds)')
    parser.add_argument('--pretrain-seeds', type=int, default=1, help='pretraining runs per MIM arm')
    parser.add_argument('--arms', nargs='+', choices=ARMS, default=[a for a in ARMS if a != 'vqkd-supervised'],
                        help='default: every arm but vqkd-supervised (it needs another labeled dataset)')
    parser.add_argument('--vqkd-teacher', choices=tuple(a for a in MIM_CONFIGS if not a.startswith('vqkd')),
                        default='pixels-blockwise',
                        help="the arm whose pretrained backbone teaches vqkd-blockwise's VQ-KD tokenizer")
    parser.add_argument('--vqkd-iters', type=int, default=1500)
    parser.add_argument('--vqkd-dead-code-ratio', type=float, default=0.1,
                        help="VQKD(dead_code_ratio=...) of vqkd-blockwise's tokenizer (0 = unilm's quantizer)")
    parser.add_argument('--teacher-labeled-root', default=None,
                        help='vqkd-supervised: ADE20K-layout root of ANOTHER labeled dataset (raw ids 1..K) whose '
                        'labels train the VQ-KD teacher')
    parser.add_argument('--teacher-num-classes', type=int, default=None, help="vqkd-supervised: that dataset's K")
    parser.add_argument('--teacher-head', choices=tuple(FT_CONFIGS), default='linear',
                        help="vqkd-supervised: the teacher's decoder while it learns the labels (default linear: the "
                        'backbone itself must separate the classes)')
    parser.add_argument('--teacher-iters', type=int, default=None,
                        help="vqkd-supervised: the teacher's training iterations (default: --ft-iters)")
    parser.add_argument('--ft-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='extra --cfg-options of every fine-tuning run (a recipe variant)')
    parser.add_argument('--ft-keep-init', nargs='+', default=[], metavar='REGEX',
                        help='pretrained arms: backbone weights (re.search on their names) that keep their random '
                        r"init when fine-tuning starts, e.g. '^blocks\.5\.' (re-initialize the last block), "
                        "'relative_position_bias_table', 'gamma_', 'norm'; the BEiT's init_cfg.keep_init")
    parser.add_argument('--pretrain-dir', default=None,
                        help='where the tokenizers and pretraining runs are (reused) and written (default: --work-dir)')
    parser.add_argument('--heads', nargs='+', choices=tuple(FT_CONFIGS), default=['linear'],
                        help='fine-tuning decoders, each run for every arm and seed (default: linear, where the '
                        'backbone does all the spatial work)')
    parser.add_argument('--dvae-iters', type=int, default=1000)
    parser.add_argument('--mim-iters', type=int, default=3000)
    parser.add_argument('--ft-iters', type=int, default=1200)
    parser.add_argument('--work-dir', default='work_dirs/mim_study')
    parser.add_argument('--img-suffix', default=None,
                        help="suffix of the labeled images (default: mmseg ADE20KDataset's, .jpg); names are free")
    parser.add_argument('--seg-map-suffix', default=None,
                        help="suffix of the label maps (default: mmseg ADE20KDataset's, .png)")
    parser.add_argument('--workers', type=int, default=2, help='dataloader workers per run')
    parser.add_argument('--jobs', type=int, default=1,
                        help='runs at a time (independent runs in parallel, each with cores / jobs threads)')
    args = parser.parse_args(argv)
    if args.num_classes < 2:
        parser.error('--num-classes must be >= 2')
    if args.pretrain_seeds < 1:
        parser.error('--pretrain-seeds must be >= 1')
    if args.num_labeled is not None and args.num_labeled < 1:
        parser.error('--num-labeled must be >= 1')
    if 'vqkd-supervised' in args.arms and (args.teacher_labeled_root is None or args.teacher_num_classes is None):
        parser.error('the vqkd-supervised arm needs --teacher-labeled-root and --teacher-num-classes (another labeled '
                     'dataset, whose labels train its VQ-KD teacher)')
    args.teacher_iters = args.teacher_iters or args.ft_iters
    if args.teacher_labeled_root:
        args.teacher_labeled_root = osp.abspath(args.teacher_labeled_root)
    args.work_dir = osp.abspath(args.work_dir)
    args.pretrain_dir = osp.abspath(args.pretrain_dir or args.work_dir)
    args.labeled_root, args.unlabeled_root = osp.abspath(args.labeled_root), osp.abspath(args.unlabeled_root)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        text = run_study(args)
    except (OutputError, LabeledDataError) as error:
        raise SystemExit(f'mim_study: {error}') from None
    print(text)


if __name__ == '__main__':
    main()
