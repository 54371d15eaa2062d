"""What a study is asked to do: :class:`MimStudySettings`, :class:`HeadStudySettings`, :class:`TransferStudySettings`
(the study functions take them, never a command line's namespace), checked and made absolute when built, and
:func:`add_mim_study_arguments`, the MIM study's options. Configs are read from ``config_dir`` (default
:func:`default_config_dir`), never from the current folder.
"""
from __future__ import annotations

import argparse
import os.path as osp
from dataclasses import dataclass, field, fields

from .configs import ARMS, FT_CONFIGS, MIM_CONFIGS, default_config_dir


class StudySettingsError(ValueError):
    """Settings a study cannot run with; the message names the option and the fix."""


def _abs(path: str | None) -> str | None:
    return None if path is None else osp.abspath(path)


@dataclass
class MimStudySettings:
    """The MIM study's settings (its command line's options): the data roots and budgets of every run. Roots and dirs are made absolute, ``teacher_iters`` defaults to
    ``ft_iters`` and ``pretrain_dir`` to ``work_dir``."""
    labeled_root: str
    unlabeled_root: str
    num_classes: int
    num_labeled: int | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    pretrain_seeds: int = 1
    arms: list[str] = field(default_factory=lambda: [a for a in ARMS if a != 'vqkd-supervised'])
    vqkd_teacher: str = 'pixels-blockwise'
    vqkd_iters: int = 1500
    vqkd_dead_code_ratio: float = 0.1
    teacher_labeled_root: str | None = None
    teacher_num_classes: int | None = None
    teacher_head: str = 'linear'
    teacher_iters: int | None = None
    ft_options: list[str] = field(default_factory=list)
    ft_keep_init: list[str] = field(default_factory=list)
    pretrain_dir: str | None = None
    heads: list[str] = field(default_factory=lambda: ['linear'])
    dvae_iters: int = 1000
    mim_iters: int = 3000
    ft_iters: int = 1200
    work_dir: str = 'work_dirs/mim_study'
    img_suffix: str | None = None
    seg_map_suffix: str | None = None
    workers: int = 2
    jobs: int = 1
    config_dir: str = field(default_factory=default_config_dir)

    def __post_init__(self):
        if self.num_classes < 2:
            raise StudySettingsError('--num-classes must be >= 2')
        if self.pretrain_seeds < 1:
            raise StudySettingsError('--pretrain-seeds must be >= 1')
        if self.num_labeled is not None and self.num_labeled < 1:
            raise StudySettingsError('--num-labeled must be >= 1')
        for name, allowed in (('arms', ARMS), ('heads', FT_CONFIGS)):
            unknown = [v for v in getattr(self, name) if v not in allowed]
            if unknown:
                raise StudySettingsError(f'--{name} {" ".join(unknown)}: not one of {", ".join(allowed)}')
        if self.vqkd_teacher not in MIM_CONFIGS or self.vqkd_teacher.startswith('vqkd'):
            raise StudySettingsError(f'--vqkd-teacher {self.vqkd_teacher}: not a MIM arm without VQ-KD')
        if self.teacher_head not in FT_CONFIGS:
            raise StudySettingsError(f'--teacher-head {self.teacher_head}: not one of {", ".join(FT_CONFIGS)}')
        if 'vqkd-supervised' in self.arms and (self.teacher_labeled_root is None or self.teacher_num_classes is None):
            raise StudySettingsError('the vqkd-supervised arm needs --teacher-labeled-root and --teacher-num-classes '
                                     '(another labeled dataset, whose labels train its VQ-KD teacher)')
        self.seeds, self.arms, self.heads = list(self.seeds), list(self.arms), list(self.heads)
        self.ft_options, self.ft_keep_init = list(self.ft_options), list(self.ft_keep_init)
        self.teacher_iters = self.teacher_iters or self.ft_iters
        self.teacher_labeled_root = _abs(self.teacher_labeled_root)
        self.work_dir = osp.abspath(self.work_dir)
        self.pretrain_dir = osp.abspath(self.pretrain_dir or self.work_dir)
        self.labeled_root, self.unlabeled_root = osp.abspath(self.labeled_root), osp.abspath(self.unlabeled_root)
        self.config_dir = osp.abspath(self.config_dir)


@dataclass
class HeadStudySettings:
    """The head study's settings: the data root, the heads and seeds, the
    iterations of every run (None: the demo configs' own) and the work dir."""
    data_root: str = 'data/ade_demo'
    heads: list[str] = field(default_factory=lambda: ['upernet', 'vit-adapter-upernet', 'mask2former',
                                                      'vit-adapter-mask2former', 'eomt'])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    iters: int | None = None
    work_dir: str = 'work_dirs/head_demo'
    config_dir: str = field(default_factory=default_config_dir)

    def __post_init__(self):
        self.heads, self.seeds = list(self.heads), list(self.seeds)
        self.data_root, self.work_dir = osp.abspath(self.data_root), osp.abspath(self.work_dir)
        self.config_dir = osp.abspath(self.config_dir)


@dataclass
class TransferStudySettings:
    """The transfer study's settings: the datasets, what every dataset's MIM
    study runs (arms, heads, seeds, jobs) and, in ``mim_options``, any other :class:`MimStudySettings` field given to
    every study unchanged (e.g. ``{'mim_iters': 3000}``)."""
    datasets: list[str] = field(default_factory=lambda: ['shapes', 'digits'])
    arms: list[str] = field(default_factory=lambda: ['scratch', 'vqkd-blockwise', 'vqkd-supervised'])
    heads: list[str] = field(default_factory=lambda: ['upernet', 'linear'])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    jobs: int = 2
    data_dir: str = 'data'
    work_dir: str = 'work_dirs/transfer_study'
    num_train: int | None = None
    num_val: int | None = None
    num_unlabeled: int | None = None
    mim_options: dict = field(default_factory=dict)
    config_dir: str = field(default_factory=default_config_dir)

    def __post_init__(self):
        if 'scratch' not in self.arms:
            raise StudySettingsError('--arms needs scratch: every result is a difference to it')
        if 'vqkd-supervised' in self.arms and len(self.datasets) < 2:
            raise StudySettingsError("the vqkd-supervised arm needs two datasets or more: its teacher learns the next "
                                     "one's labels")
        own = {f.name for f in fields(self)} - {'mim_options', 'data_dir', 'num_train', 'num_val', 'num_unlabeled',
                                                  'datasets'}
        names = {f.name for f in fields(MimStudySettings)}
        wrong = sorted(k for k in self.mim_options if k not in names or k in own
                       or k in ('labeled_root', 'unlabeled_root', 'num_classes', 'teacher_labeled_root',
                                'teacher_num_classes'))
        if wrong:
            raise StudySettingsError(f'{", ".join(wrong)}: not a MIM study setting the transfer study passes on (it '
                                     'sets the data roots, class counts, arms, heads, seeds, jobs and work dirs '
                                     'itself)')
        self.datasets, self.arms, self.heads, self.seeds = (list(self.datasets), list(self.arms), list(self.heads),
                                                            list(self.seeds))
        self.work_dir, self.data_dir = osp.abspath(self.work_dir), osp.abspath(self.data_dir)
        self.config_dir = osp.abspath(self.config_dir)


def add_mim_study_arguments(parser: argparse.ArgumentParser, passed_on: bool = False) -> argparse.ArgumentParser:
    """Add the MIM study's options (dests = :class:`MimStudySettings` fields) to ``parser``; ``passed_on``: only those
    the transfer study passes on to every dataset's study, none required and none with a default (an option not
    given is absent from the namespace)."""
    def add(*flags, default=None, **kwargs):
        if passed_on:
            kwargs.pop('required', None)
            parser.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)
        else:
            parser.add_argument(*flags, default=default, **kwargs)

    if not passed_on:
        add('--labeled-root', required=True, help='ADE20K-layout root with raw labels 1..K')
        add('--unlabeled-root', required=True, help='root whose images/training holds the unlabeled pool')
        add('--num-classes', type=int, required=True, help='K: raw label ids 1..K are the classes')
    add('--num-labeled', type=int, help='fine-tune and probe on the first N labeled training images (default: all)')
    if not passed_on:
        add('--seeds', type=int, nargs='+', default=[0, 1, 2], help='fine-tuning seeds (>= 3 for stds)')
    add('--pretrain-seeds', type=int, default=1, help='pretraining runs per MIM arm')
    if not passed_on:
        add('--arms', nargs='+', choices=ARMS, default=[a for a in ARMS if a != 'vqkd-supervised'],
            help='default: every arm but vqkd-supervised (it needs another labeled dataset)')
    add('--vqkd-teacher', choices=tuple(a for a in MIM_CONFIGS if not a.startswith('vqkd')),
        default='pixels-blockwise', help="the arm whose pretrained backbone teaches vqkd-blockwise's VQ-KD tokenizer")
    add('--vqkd-iters', type=int, default=1500)
    add('--vqkd-dead-code-ratio', type=float, default=0.1,
        help="VQKD(dead_code_ratio=...) of vqkd-blockwise's tokenizer (0 = unilm's quantizer)")
    if not passed_on:
        add('--teacher-labeled-root', help='vqkd-supervised: ADE20K-layout root of ANOTHER labeled dataset (raw ids '
            '1..K) whose labels train the VQ-KD teacher')
        add('--teacher-num-classes', type=int, help="vqkd-supervised: that dataset's K")
    add('--teacher-head', choices=tuple(FT_CONFIGS), default='linear',
        help="vqkd-supervised: the teacher's decoder while it learns the labels (default linear: the backbone itself "
        'must separate the classes)')
    add('--teacher-iters', type=int, help="vqkd-supervised: the teacher's training iterations (default: --ft-iters)")
    add('--ft-options', nargs='+', default=[], metavar='KEY=VALUE',
        help='extra --cfg-options of every fine-tuning run (a recipe variant)')
    add('--ft-keep-init', nargs='+', default=[], metavar='REGEX',
        help='pretrained arms: backbone weights (re.search on their names) that keep their random init when '
        r"fine-tuning starts, e.g. '^blocks\.5\.' (re-initialize the last block), 'relative_position_bias_table', "
        "'gamma_', 'norm'; the BEiT's init_cfg.keep_init")
    add('--pretrain-dir', help='where the tokenizers and pretraining runs are (reused) and written (default: '
        '--work-dir)')
    if not passed_on:
        add('--heads', nargs='+', choices=tuple(FT_CONFIGS), default=['linear'],
            help='fine-tuning decoders, each run for every arm and seed (default: linear, where the backbone does all '
            'the spatial work)')
    add('--dvae-iters', type=int, default=1000)
    add('--mim-iters', type=int, default=3000)
    add('--ft-iters', type=int, default=1200)
    if not passed_on:
        add('--work-dir', default='work_dirs/mim_study')
    add('--img-suffix', help="suffix of the labeled images (default: mmseg ADE20KDataset's, .jpg); names are free")
    add('--seg-map-suffix', help="suffix of the label maps (default: mmseg ADE20KDataset's, .png)")
    add('--workers', type=int, default=2, help='dataloader workers per run')
    if not passed_on:
        add('--jobs', type=int, default=1,
            help='runs at a time (independent runs in parallel, each with cores / jobs threads)')
    return parser
