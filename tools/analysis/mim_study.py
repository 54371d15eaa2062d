"""Does BEiT pretraining help when labels are scarce? The study a user runs before trusting beit_mm's MIM.

    python tools/analysis/mim_study.py --labeled-root data/shapes --unlabeled-root data/shapes_unlabeled \
        --num-classes 7 [--num-labeled N] [--seeds 0 1 2] [--pretrain-seeds 1] [--jobs 2] [--arms scratch
        tokens-blockwise pixels-blockwise tokens-random vqkd-blockwise vqkd-supervised]
        [--heads linear upernet eomt mask2former]
        [--dvae-iters 1000] [--mim-iters 3000] [--ft-iters 1200] [--vqkd-teacher pixels-blockwise] [--vqkd-iters 1500]
        [--vqkd-dead-code-ratio 0.1] [--teacher-labeled-root OTHER --teacher-num-classes K [--teacher-head linear]
        [--teacher-iters N]] [--ft-options KEY=VALUE ...] [--ft-keep-init REGEX ...] [--pretrain-dir DIR]
        [--img-suffix .jpg] [--seg-map-suffix .png] [--work-dir work_dirs/mim_study]

Several datasets in one command, each with its own tables and a summary of where each result holds:
``tools/analysis/transfer_study.py``.

Protocol (configs in ``configs/mim_study/``; any ADE20K-layout labeled root with raw ids 1..K, read through mmseg's
``ADE20KDataset`` with its suffixes (``--img-suffix``/``--seg-map-suffix``, default .jpg/.png; file names are free),
and any folder of unlabeled images under ``<unlabeled root>/images/training`` work unchanged; ``--num-labeled N``
keeps the first N labeled training images in file-name order, for fine-tuning, the probe and the majority baseline
alike, so the same labeled root gives the scarcer-label settings):

1. tokenizer: a dVAE trained on the unlabeled pool, its encoder exported (``convert_checkpoint.py --source dvae``);
   held-out codebook usage, perplexity and PSNR on the labeled set's validation images (never trained on).
2. pretraining arms, each on the unlabeled pool with the same budget: ``tokens-blockwise`` (BEiT: dVAE ids,
   blockwise masking), ``pixels-blockwise`` (per-patch normalized pixels, L2), ``tokens-random`` (uniformly random
   masking of the same count), ``vqkd-blockwise`` (BEiT v2's targets: the ids of a VQ-KD tokenizer distilled, on the
   same pool, from the ``--vqkd-teacher`` arm's pretrained backbone, so no labels and no outside weights; trained
   ``--vqkd-iters`` iterations with ``--vqkd-dead-code-ratio``, beit_mm's dead-code re-seeding, 0 = unilm's
   quantizer; held-out usage, perplexity, dead codes and teacher cosine reported), ``vqkd-supervised`` (the same,
   but the VQ-KD teacher is a backbone that *knows labels the pool has none of*, as CLIP does for BEiT v2: the
   ``--teacher-head`` fine-tuning recipe trained from random init with the labels of ANOTHER dataset,
   ``--teacher-labeled-root``, ``--teacher-num-classes``; its last block teaches). ``--pretrain-seeds P`` pretrains
   each arm P times (fine-tuning seed s uses pretraining run s mod P).
3. frozen-feature check: the dense probe (``beit_mm.evaluation.probe``, the one ``tools/analysis/probe.py`` and
   ``beit_mm.DenseProbeHook`` use): a linear probe and a k-NN classifier of each 8 px patch's majority label on the
   frozen patch features of the blocks a segmentor reads (1, 2, 3, 5), fit on the labeled training images, scored
   as mIoU / mAcc and k-NN accuracy on the validation patches, next to the majority class; ``scratch`` probes a
   randomly initialized backbone. Every MIM run also logs the probe every 500 iterations (``DenseProbeHook`` in the
   configs) into ``<work-dir>/mim/<arm>_seed<s>/dense_probe.json``.
4. fine-tuning: semantic segmentation on the labeled set with the same config, iterations and hyperparameters for
   every arm (only the backbone init and the seed differ), ``len(--seeds)`` seeds per arm and decoder; validation
   mIoU / aAcc. ``--heads``: ``linear`` (default; a 1x1 convolution on the last block's patch tokens, so the backbone
   does all the spatial work) and/or ``upernet`` (the segmentation recipe's UPerNet, whose own 3x3 convolutions over
   a 4-level pyramid can learn shapes from the labels and so measure backbone + decoder) and/or ``eomt`` (EoMT:
   100 queries in the last 2 blocks, mask classification, no decoder; drop path 0) and/or ``mask2former`` (mmseg's
   Mask2FormerHead on UPerNet's pyramid: 100 queries, deformable pixel decoder, 9 masked-attention decoder layers;
   ``--num-classes`` also sets its per-class loss weights). ``--ft-options`` adds
   ``--cfg-options`` to every fine-tuning run (a variant of the recipe, e.g.
   ``optim_wrapper.paramwise_cfg.layer_decay_rate=0.65``); ``--ft-keep-init REGEX ...`` leaves the named backbone
   weights of the pretrained arms at their random init (re-initialized last blocks, no relative position bias, no
   layer scale: what a MIM checkpoint carries over); with ``--pretrain-dir`` pointing at an earlier study's
   work dir, its tokenizers and pretraining runs are reused and only the fine-tuning and probes run again.
5. report: mean +- sample std over seeds of every metric, next to the trivial baselines (majority class for mIoU and
   aAcc and for the probe, the most frequent token for MIM accuracy), as Markdown (``report.md``) and JSON
   (``report.json``) in the work dir, and printed; ``probe_curves.png``: every MIM arm's probe mIoU over
   pretraining (its ``DenseProbeHook`` curve) with the random-init and majority-class levels. A pretrained arm whose
   probe mIoU does not beat the random-init probe (``scratch``) by ``PROBE_MIN_GAIN`` points gets a WARNING line
   under the probe table, before the fine-tuning tables (its pretraining taught nothing the probe sees).

Runs go through ``tools/train.py`` in subprocesses with the configs written to ``<work-dir>/configs/`` (the shipped
configs with the data roots, the class count and, when the iteration counts are changed, every iteration-valued field
rescaled). A finished run (its ``metrics.json``, which records the settings it ran with) is reused when the study is
started again with the same work dir and settings; one with other settings (e.g. another ``--num-labeled``) stops the
study with an error naming the folder, so each setting gets its own ``--work-dir``.
"""
from __future__ import annotations

import argparse
import glob
import inspect
import json
import os
import os.path as osp
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)

from beit_mm.fileio.outputs import atomic_file  # noqa: E402 (after the repository is on sys.path)

STUDY = osp.join(ROOT, 'configs', 'mim_study')
DVAE_CONFIG = osp.join(STUDY, 'dvae-tiny-v256_1xb32-1k_64px.py')
MIM_CONFIGS = {
    'tokens-blockwise': osp.join(STUDY, 'beit-tiny-p8_1xb32-coslr-3000i_64px_mim-tokens-blockwise.py'),
    'pixels-blockwise': osp.join(STUDY, 'beit-tiny-p8_1xb32-coslr-3000i_64px_mim-pixels-blockwise.py'),
    'tokens-random': osp.join(STUDY, 'beit-tiny-p8_1xb32-coslr-3000i_64px_mim-tokens-random.py'),
    'vqkd-blockwise': osp.join(STUDY, 'beit-tiny-p8_1xb32-coslr-3000i_64px_mim-vqkd-blockwise.py'),
    # the same MIM recipe; its VQ-KD tokenizer is distilled from a backbone trained with labels on another dataset
    'vqkd-supervised': osp.join(STUDY, 'beit-tiny-p8_1xb32-coslr-3000i_64px_mim-vqkd-blockwise.py'),
}
VQKD_CONFIG = osp.join(STUDY, 'vqkd-tiny-p8-dec1x_mim-teacher_1xb32-coslr-1500i_64px.py')
# The arms with a tokenizer: the task that trains it and the file (in the pretraining dir) its MIM config reads.
TOKENIZER_OF = {'tokens-blockwise': 'tokenizer', 'tokens-random': 'tokenizer', 'vqkd-blockwise': 'vqkd',
                'vqkd-supervised': 'vqkd_supervised'}
TOKENIZER_FILES = {'tokenizer': 'tokenizer.pth', 'vqkd': 'vqkd_tokenizer.pth',
                   'vqkd_supervised': 'vqkd_supervised_tokenizer.pth'}
FT_CONFIGS = {  # fine-tuning decoders: the same backbone, data, optimizer and schedule
    'linear': osp.join(STUDY, 'beit-tiny-p8_mim-pre_linear_1xb8-1200i_ade20k-64x64.py'),
    'upernet': osp.join(STUDY, 'beit-tiny-p8_mim-pre_upernet_1xb8-1200i_ade20k-64x64.py'),
    'eomt': osp.join(STUDY, 'beit-tiny-p8_mim-pre_eomt_1xb8-1200i_ade20k-64x64.py'),
    'mask2former': osp.join(STUDY, 'beit-tiny-p8_mim-pre_mask2former_1xb8-1200i_ade20k-64x64.py'),
}
ARMS = ('scratch', ) + tuple(MIM_CONFIGS)
# Linear probe: full-batch Adam on standardized features (a convex problem; enough steps to converge on ~20k patches).
PROBE_STEPS = 300
PROBE_LR = 0.05
PROBE_WEIGHT_DECAY = 1e-4
FEATURE_IMAGES = 64  # validation images of the per-block feature statistics


# ------------------------------------------------------------------------------------------------ configs
def rescale_iterations(cfg, max_iters: int) -> None:
    """Set ``train_cfg.max_iters`` and rescale every iteration-valued field (scheduler begin/end, hook iteration
    counts and intervals, checkpoint/logger/val intervals, EoMT's mask-annealing steps) by ``max_iters / old``,
    keeping >= 1 and begin < end."""
    old = cfg.train_cfg.max_iters
    if max_iters == old:
        return
    ratio = max_iters / old

    def scale(n: int) -> int:
        return max(1, min(max_iters, int(round(n * ratio))))

    cfg.train_cfg.max_iters = max_iters
    if 'val_interval' in cfg.train_cfg:
        cfg.train_cfg.val_interval = scale(cfg.train_cfg.val_interval)
    for sched in cfg.param_scheduler:
        begin, end = int(round(sched.get('begin', 0) * ratio)), scale(sched.get('end', old))
        sched.begin, sched.end = min(begin, max_iters - 1), max(end, min(begin, max_iters - 1) + 1)
    for hook in cfg.get('custom_hooks', []):
        for key in list(hook):
            if key.endswith('_iters') or key == 'interval':
                hook[key] = scale(hook[key])
    for name in ('checkpoint', 'logger'):
        if name in cfg.default_hooks and 'interval' in cfg.default_hooks[name]:
            cfg.default_hooks[name].interval = scale(cfg.default_hooks[name].interval)
    annealing = cfg.model.get('mask_annealing')  # beit_mm.EoMT: the steps where each masked block's masks fade
    if annealing:
        annealing.start_steps = [scale(n) for n in annealing.start_steps]
        annealing.end_steps = [max(scale(n), start + 1) for n, start in zip(annealing.end_steps, annealing.start_steps)]


def write_config(src: str, dst: str, edit) -> str:
    """Load ``src``, apply ``edit(cfg)``, dump the merged config to ``dst``; return ``dst``."""
    from mmengine.config import Config
    cfg = Config.fromfile(src)
    edit(cfg)
    with atomic_file(dst) as tmp, open(tmp, 'w', encoding='utf-8') as f:  # Config.dump of a .py file, atomically
        f.write(cfg.pretty_text)
    return dst


def set_loader(loader, root: str, workers: int) -> None:
    loader.num_workers = workers
    loader.persistent_workers = workers > 0
    loader.dataset.data_root = root


def study_configs(args) -> dict[str, str]:
    """Write the study's configs for these data roots, class count and iteration counts; return their paths."""
    from mmseg.datasets import ADE20KDataset
    out = osp.join(args.work_dir, 'configs')
    heldout = osp.join(args.labeled_root, 'images', 'validation')
    # the labeled files' suffixes: --img-suffix / --seg-map-suffix, else those of mmseg's ADE20KDataset
    defaults = inspect.signature(ADE20KDataset.__init__).parameters
    suffixes = dict(img_suffix=args.img_suffix or defaults['img_suffix'].default,
                    seg_map_suffix=args.seg_map_suffix or defaults['seg_map_suffix'].default)

    def dvae(cfg):
        set_loader(cfg.train_dataloader, args.unlabeled_root, args.workers)
        for hook in cfg.custom_hooks:
            if hook.type == 'beit_mm.TokenizerEvalHook':
                hook.folder = heldout
        rescale_iterations(cfg, args.dvae_iters)

    def vqkd(cfg):
        set_loader(cfg.train_dataloader, args.unlabeled_root, args.workers)
        cfg.model.dead_code_ratio = args.vqkd_dead_code_ratio
        for hook in cfg.custom_hooks:
            if hook.type == 'beit_mm.TokenizerEvalHook':
                hook.folder = heldout
        rescale_iterations(cfg, args.vqkd_iters)

    def mim(cfg, arm):
        set_loader(cfg.train_dataloader, args.unlabeled_root, args.workers)
        for hook in cfg.get('custom_hooks', []):
            if hook.type == 'beit_mm.DenseProbeHook':  # the probe curve during pretraining, on the labeled set
                hook.update(data_root=args.labeled_root, num_classes=args.num_classes,
                            img_suffix=suffixes['img_suffix'], seg_map_suffix=suffixes['seg_map_suffix'])
                if args.num_labeled and (hook.get('num_train') is None or args.num_labeled < hook.num_train):
                    hook.num_train = args.num_labeled  # only the labels the study may use
        if arm in TOKENIZER_OF:
            cfg.model.target_generator.init_cfg.checkpoint = osp.join(args.pretrain_dir,
                                                                      TOKENIZER_FILES[TOKENIZER_OF[arm]])
        rescale_iterations(cfg, args.mim_iters)

    def finetune(cfg, root=args.labeled_root, num_classes=args.num_classes, num_labeled=args.num_labeled,
                 iters=args.ft_iters):
        for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
            set_loader(loader, root, args.workers)
            loader.dataset.metainfo = dict(classes=tuple(ADE20KDataset.METAINFO['classes'][:num_classes]))
            loader.dataset.update(suffixes)
        if num_labeled:  # mmengine's BaseDataset keeps the first N of its (file-name sorted) samples
            cfg.train_dataloader.dataset.indices = num_labeled
        for head in (cfg.model.get('decode_head'), cfg.model.get('auxiliary_head')):
            if head:
                head.num_classes = num_classes
                weights = (head.get('loss_cls') or {}).get('class_weight')
                if weights:  # Mask2FormerHead: one weight per class, then the no-object class's
                    head.loss_cls.class_weight = [1.0] * num_classes + [weights[-1]]
        if 'num_classes' in cfg.model:  # beit_mm.EoMT: the classes are the segmentor's own
            cfg.model.num_classes = num_classes
        if args.ft_keep_init and cfg.model.backbone.get('init_cfg'):  # pretrained arms only: scratch sets None
            cfg.model.backbone.init_cfg.keep_init = list(args.ft_keep_init)
        rescale_iterations(cfg, iters)

    def teacher(cfg):  # trained from scratch with the labels of another dataset
        finetune(cfg, args.teacher_labeled_root, args.teacher_num_classes, None, args.teacher_iters)
        cfg.model.backbone.init_cfg = None

    def vqkd_supervised(cfg):  # vqkd's recipe; the teacher is the supervised segmentor's backbone, its last block
        from mmengine.config import Config
        vqkd(cfg)
        seg = Config.fromfile(FT_CONFIGS[args.teacher_head]).model
        backbone = seg.backbone.to_dict()
        backbone.update(out_indices=(backbone['arch']['num_layers'] - 1, ), drop_path_rate=0.0,
                        init_cfg=dict(type='Pretrained', checkpoint='<the teacher run\'s checkpoint>',
                                      prefix='backbone.'))
        cfg.model.teacher.backbone = backbone
        cfg.model.teacher.mean = tuple(m / 255 for m in seg.data_preprocessor.mean)
        cfg.model.teacher.std = tuple(m / 255 for m in seg.data_preprocessor.std)

    paths = {'dvae': write_config(DVAE_CONFIG, osp.join(out, 'dvae.py'), dvae)}
    for head in args.heads:
        paths[f'finetune-{head}'] = write_config(FT_CONFIGS[head], osp.join(out, f'finetune_{head}.py'), finetune)
    if 'vqkd-blockwise' in args.arms:
        paths['vqkd'] = write_config(VQKD_CONFIG, osp.join(out, 'vqkd.py'), vqkd)
    if 'vqkd-supervised' in args.arms:
        paths['teacher'] = write_config(FT_CONFIGS[args.teacher_head], osp.join(out, f'teacher_{args.teacher_head}.py'),
                                        teacher)
        paths['vqkd_supervised'] = write_config(VQKD_CONFIG, osp.join(out, 'vqkd_supervised.py'), vqkd_supervised)
    for arm in pretrained_arms(args):
        paths[arm] = write_config(MIM_CONFIGS[arm], osp.join(out, f'mim_{arm}.py'), lambda cfg, arm=arm: mim(cfg, arm))
    return paths


def pretrained_arms(args) -> list[str]:
    """The arms to pretrain: the MIM arms asked for, plus the VQ-KD teacher's arm when ``vqkd-blockwise`` is."""
    arms = [a for a in args.arms if a != 'scratch']
    if 'vqkd-blockwise' in arms and args.vqkd_teacher not in arms:
        arms.insert(0, args.vqkd_teacher)
    return arms


# ----------------------------------------------------------------------------------------------------- runs
def train(config: str, work_dir: str, options: list[str]) -> str:
    """``tools/train.py config`` in a subprocess; the log text (also in ``work_dir/train.log``, this process's part).

    :func:`cached` trains only where no finished run is, so any checkpoints there are the study's own, left by a run
    that was cut short (a killed job, the end of a session). The run records what it was started with (the config
    text and ``options``) in ``work_dir/run.json``; a later call with the same ones continues the cut run from its last
    complete checkpoint (``tools/train.py --resume``, bit-identical to an uncut run in tests/test_kill_resume.py; the
    pretraining configs save every 500 iterations, the dVAE's every 250); with other ones, or none recorded, it starts
    again over them (``--overwrite``)."""
    os.makedirs(work_dir, exist_ok=True)
    with open(config) as f:
        started = dict(config=f.read(), options=list(options))
    record = osp.join(work_dir, 'run.json')
    same = False
    if osp.isfile(record):
        with open(record) as f:
            same = json.load(f) == started
    cmd = [sys.executable, osp.join(ROOT, 'tools', 'train.py'), config, '--work-dir', work_dir,
           '--resume' if same else '--overwrite']
    if not same:
        with atomic_file(record) as tmp, open(tmp, 'w') as f:
            json.dump(started, f)
    if options:
        cmd += ['--cfg-options', *options]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    log = proc.stdout + proc.stderr
    with atomic_file(osp.join(work_dir, 'train.log')) as tmp, open(tmp, 'w') as f:
        f.write(log)
    if proc.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed (exit {proc.returncode}); log {work_dir}/train.log:\n'
                           f'{log[-3000:]}')
    return log


def last_value(log: str, key: str) -> float:
    found = re.findall(rf'(?<![\w/]){re.escape(key)}: (-?[0-9.]+(?:e-?\d+)?)', log)
    if not found:
        raise RuntimeError(f'no "{key}: <number>" in the training log')
    return float(found[-1])


def cached(work_dir: str, run, settings: dict) -> dict:
    """``run()``'s metrics, stored with the ``settings`` that produced them in ``work_dir/metrics.json`` and reused
    when that file exists. A finished run with other settings (e.g. another ``--num-labeled`` in the same work dir)
    stops the study with an error: its results are neither overwritten nor reported as this study's."""
    path = osp.join(work_dir, 'metrics.json')
    if osp.isfile(path):
        with open(path) as f:
            metrics = json.load(f)
        stored = metrics.get('settings', settings)  # runs finished before settings were recorded are reused
        if stored != settings:
            changed = '; '.join(f'{k}: {stored.get(k)!r} there, {v!r} now' for k, v in settings.items()
                                if stored.get(k) != v)
            raise RuntimeError(f'{work_dir} holds a finished run with other settings ({changed}). Fix: start the '
                               'study with another --work-dir, or delete that folder to redo the run.')
        return metrics
    start = time.time()
    metrics = run()
    metrics['seconds'] = round(time.time() - start, 1)
    metrics['settings'] = settings
    with atomic_file(path) as tmp, open(tmp, 'w') as f:  # a kill leaves no half-written metrics.json
        json.dump(metrics, f, indent=1)
    return metrics


def last_checkpoint(work_dir: str) -> str:
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        return osp.join(work_dir, osp.basename(f.read().strip()))


def last_tokenizer_eval(work_dir: str) -> dict:
    """The held-out statistics ``TokenizerEvalHook`` wrote last (``tokenizer_eval/iter_N.json``, largest N)."""
    evals = glob.glob(osp.join(work_dir, 'tokenizer_eval', 'iter_*.json'))
    with open(max(evals, key=lambda p: int(re.search(r'iter_(\d+)', p).group(1)))) as f:
        return json.load(f)


def run_tokenizer(args, configs) -> dict:
    work = osp.join(args.pretrain_dir, 'dvae')

    def run():
        train(configs['dvae'], work, [f'randomness.seed={args.seeds[0]}'])
        subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'convert_checkpoint.py'), '--model', 'dalle',
                        '--source', 'dvae', last_checkpoint(work), osp.join(args.pretrain_dir, 'tokenizer.pth')],
                       cwd=ROOT, check=True, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', '')))
        return last_tokenizer_eval(work)

    return cached(work, run, dict(unlabeled_root=args.unlabeled_root, dvae_iters=args.dvae_iters, seed=args.seeds[0]))


def teacher_settings(args) -> dict:
    """What the supervised teacher of ``vqkd-supervised`` depends on: the other dataset, its labels and budget."""
    return dict(teacher_labeled_root=args.teacher_labeled_root, teacher_num_classes=args.teacher_num_classes,
                teacher_head=args.teacher_head, teacher_iters=args.teacher_iters, seed=args.seeds[0])


def vqkd_settings(args, kind: str = 'vqkd') -> dict:
    teacher = (dict(teacher=args.vqkd_teacher, teacher_mim_iters=args.mim_iters) if kind == 'vqkd' else
               dict(teacher='supervised', **teacher_settings(args)))
    return dict(teacher, unlabeled_root=args.unlabeled_root, vqkd_iters=args.vqkd_iters,
                dead_code_ratio=args.vqkd_dead_code_ratio, seed=args.seeds[0])


def run_teacher(args, configs) -> dict:
    """The supervised teacher of ``vqkd-supervised``: the fine-tuning recipe (``--teacher-head``) trained from random
    init with the labels of ``--teacher-labeled-root`` (another dataset); its validation mIoU there and checkpoint."""
    work = osp.join(args.pretrain_dir, 'teacher')

    def run():
        log = train(configs['teacher'], work, [f'randomness.seed={args.seeds[0]}'])
        return dict(mIoU=last_value(log, 'mIoU'), aAcc=last_value(log, 'aAcc'), checkpoint=last_checkpoint(work))

    return cached(work, run, teacher_settings(args))


def run_vqkd(args, configs, teacher_checkpoint: str, kind: str = 'vqkd') -> dict:
    """The VQ-KD tokenizer of the ``vqkd-blockwise`` arm (``kind='vqkd'``, distilled from a study MIM run's
    backbone) or of ``vqkd-supervised`` (from the supervised teacher's), trained on the unlabeled pool; its weights
    without the teacher go to ``<pretrain dir>/TOKENIZER_FILES[kind]``; returns the last held-out stats."""
    work = osp.join(args.pretrain_dir, kind)

    def run():
        import torch

        from beit_mm.fileio import load_state_dict_file
        train(configs[kind], work, [f'randomness.seed={args.seeds[0]}',
                                    f'model.teacher.backbone.init_cfg.checkpoint={teacher_checkpoint}'])
        weights = {k: v for k, v in load_state_dict_file(last_checkpoint(work)).items() if not k.startswith('teacher.')}
        with atomic_file(osp.join(args.pretrain_dir, TOKENIZER_FILES[kind])) as tmp:  # a kill leaves no half file
            torch.save(weights, tmp)
        return dict(last_tokenizer_eval(work), teacher_checkpoint=teacher_checkpoint)

    return cached(work, run, vqkd_settings(args, kind))


def run_pretrain(args, configs, arm: str, seed: int) -> dict:
    work = osp.join(args.pretrain_dir, 'mim', f'{arm}_seed{seed}')

    def run():
        log = train(configs[arm], work, [f'randomness.seed={seed}'])
        metrics = dict(loss=last_value(log, 'loss'), checkpoint=last_checkpoint(work))
        if arm in TOKENIZER_OF:
            metrics.update(mim_acc=last_value(log, 'mim_acc'), mim_acc_baseline=last_value(log, 'mim_acc_baseline'))
        else:
            metrics.update(loss_baseline=last_value(log, 'loss_baseline'))
        return metrics

    settings = dict(unlabeled_root=args.unlabeled_root, mim_iters=args.mim_iters, seed=seed)
    if TOKENIZER_OF.get(arm, '').startswith('vqkd'):
        settings['tokenizer'] = vqkd_settings(args, TOKENIZER_OF[arm])
    return cached(work, run, settings)


def probe_curve(checkpoint: str) -> dict | None:
    """The ``DenseProbeHook`` curve a MIM run left next to its checkpoint (``dense_probe.json``), if any."""
    path = osp.join(osp.dirname(checkpoint), 'dense_probe.json')
    if not osp.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_finetune(args, configs, head: str, arm: str, checkpoint: str | None, seed: int) -> dict:
    work = osp.join(args.work_dir, 'finetune', head, f'{arm}_seed{seed}')
    init = 'model.backbone.init_cfg=None' if checkpoint is None else f'model.backbone.init_cfg.checkpoint={checkpoint}'
    options = [f'randomness.seed={seed}', init, *args.ft_options]

    def run():
        log = train(configs[f'finetune-{head}'], work, options)
        return dict(mIoU=last_value(log, 'mIoU'), aAcc=last_value(log, 'aAcc'), mAcc=last_value(log, 'mAcc'))

    settings = dict(labeled_settings(args), ft_iters=args.ft_iters, seed=seed,
                    mim_iters=None if checkpoint is None else args.mim_iters)
    if args.ft_options:
        settings['ft_options'] = list(args.ft_options)
    if args.ft_keep_init and checkpoint is not None:
        settings['ft_keep_init'] = list(args.ft_keep_init)
    if checkpoint is not None and args.pretrain_dir != args.work_dir:
        settings['checkpoint'] = checkpoint
    return cached(work, run, settings)


def labeled_settings(args) -> dict:
    """What a fine-tuning or probe result depends on besides its own run: the labeled data it saw."""
    return dict(labeled_root=args.labeled_root, num_classes=args.num_classes, num_labeled=args.num_labeled)


# ------------------------------------------------------------------------------- labeled data and the probe
def labeled_dataset(args, configs, split: str, subset: bool = True):
    """The fine-tuning config's training (``'training'``: its first ``--num-labeled`` images, all of them with
    ``subset=False``) or validation dataset, through mmseg's dataset class with the config's suffixes
    (``beit_mm.evaluation.probe.build_seg_dataset``: an error names the suffix, the folder and the files found)."""
    from mmengine.config import Config

    from beit_mm.evaluation.probe import build_seg_dataset
    cfg = Config.fromfile(configs[f'finetune-{args.heads[0]}'])  # the data are the same in every head's config
    dataset = (cfg.train_dataloader if split == 'training' else cfg.val_dataloader).dataset.to_dict()
    if not subset:
        dataset.pop('indices', None)
    return build_seg_dataset(dataset)


def check_unlabeled(args, configs) -> int:
    """The number of images in the unlabeled pool, as the tokenizer's and the MIM runs' dataset (mmpretrain's
    ``CustomDataset``, its image extensions) lists them; an error names the folder, the extensions and what it holds."""
    from mmengine.config import Config
    from mmpretrain.datasets import CustomDataset

    from beit_mm.evaluation.probe import LabeledDataError, describe_files
    dataset = Config.fromfile(configs['dvae']).train_dataloader.dataset
    extensions = dataset.get('extensions') or inspect.signature(CustomDataset.__init__).parameters['extensions'].default
    folder = osp.join(dataset.data_root, dataset.data_prefix)
    found = sum(f.lower().endswith(tuple(extensions)) for _, _, files in os.walk(folder) for f in files)
    if not found:
        raise LabeledDataError(f'0 images matched {", ".join("*" + e for e in extensions)} in {folder} (the unlabeled '
                               f'pool); {describe_files(folder)}. Fix: --unlabeled-root needs its images under '
                               'images/training (any names, any of those suffixes)')
    return found


def frozen_probe(args, configs, probe, checkpoint: str | None, seed: int) -> dict:
    """The dense probe (``beit_mm.evaluation.probe.DenseProbe`` of the labeled set) of the fine-tuning config's
    backbone with the pretrained weights (random ones drawn with ``seed`` for ``checkpoint=None``): probe mIoU / mAcc
    and k-NN accuracy on the validation patches of the layers a segmentor reads, and the majority class's numbers;
    ``features``: the start's per-block statistics (``beit_mm.evaluation.feature_stats``) on the first
    ``FEATURE_IMAGES`` validation images."""
    from beit_mm.evaluation.feature_stats import feature_statistics
    from beit_mm.evaluation.probe import probe_model
    model = probe_model(configs[f'finetune-{args.heads[0]}'], checkpoint, seed)
    return dict(probe.evaluate(model), features=feature_statistics(model, probe.val.images[:FEATURE_IMAGES]))


def majority_baseline(train_dataset, val_dataset) -> dict:
    """mIoU / aAcc / mAcc (percent) of predicting the most frequent training class (pixels of the training dataset,
    e.g. its first ``--num-labeled`` images) everywhere on the validation set (``majority_metrics``)."""
    from beit_mm.evaluation.probe import label_counts, majority_metrics
    val_counts = label_counts(val_dataset)
    if val_counts.sum() == 0:
        raise RuntimeError(f'no label of the {len(val_counts)} classes in the {len(val_dataset)} validation maps under '
                           f'{val_dataset.data_prefix["seg_map_path"]}: raw ids must be 1..{len(val_counts)}')
    return majority_metrics(label_counts(train_dataset), val_counts)


# ------------------------------------------------------------------------------------------------- report
def mean_std(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values: list[float]) -> str:
    mean, std = mean_std(values)
    return f'{mean:.2f} ± {std:.2f}'


PROBE_MIN_GAIN = 1.0  # probe mIoU points over random init that count as learned (DenseProbeHook's min_gain)


def probe_warnings(results: dict, min_gain: float = PROBE_MIN_GAIN) -> list[str]:
    """Report lines for the pretrained arms whose frozen features do not beat the random-init probe (the
    ``scratch`` arm's) by ``min_gain`` mIoU points: their pretraining taught the backbone nothing the probe sees, and
    fine-tuning from them can end below scratch. Empty without a ``scratch`` arm."""
    if 'scratch' not in results or not results['scratch']['probe']:
        return []
    init = statistics.mean(p['probe_mIoU'] for p in results['scratch']['probe'])
    lines = []
    for arm, res in results.items():
        if arm == 'scratch' or not res['pretrain'] or not res['probe']:
            continue
        probe = statistics.mean(p['probe_mIoU'] for p in res['probe'])
        if probe < init + min_gain:
            lines.append(f'- WARNING {arm}: frozen-feature probe mIoU {probe:.2f} vs {init:.2f} at random init '
                         f'(gain {probe - init:+.2f} < {min_gain:g}): this pretraining taught the backbone nothing '
                         'the probe sees; fine-tuning from it may end below scratch.')
    return lines


def feature_table(results: dict) -> list[str]:
    """Report lines: the per-block statistics of every arm's fine-tuning start (pretraining run 0; scratch = random
    init), for what a MIM checkpoint carries over; empty when the probe results predate them."""
    if not all(res['probe'] and 'features' in res['probe'][0] for res in results.values()):
        return []
    columns = (('rms', 'token RMS'), ('token_cosine', 'token cosine'), ('gamma_1', 'mean abs gamma_1'),
               ('gamma_2', 'mean abs gamma_2'), ('rel_pos_bias_std', 'rel. pos. bias std'))
    lines = ['', f'What each fine-tuning start carries (the first {FEATURE_IMAGES} validation images; one value per '
             'block, block 1 first; token cosine: mean cosine between the patch tokens of an image, 1 = all alike; '
             'gamma: layer scales):', '', '| arm | ' + ' | '.join(title for _, title in columns) + ' |',
             '|---|' + '---|' * len(columns)]
    for arm, res in results.items():
        stats = res['probe'][0]['features']
        lines.append(f'| {arm} | ' + ' | '.join(' / '.join(f'{v:.2f}' for v in stats[key]) or '-'
                                               for key, _ in columns) + ' |')
    return lines


def report(args, results: dict, tokenizer: dict | None, vqkd: dict | None, baseline: dict, seconds: float,
           teacher: dict | None = None, vqkd_supervised: dict | None = None) -> str:
    runs = [r for res in results.values() for r in res['pretrain'] + res['probe'] +
            [r for per_head in res['finetune'].values() for r in per_head]] + [
                t for t in (tokenizer, vqkd, teacher, vqkd_supervised) if t]
    run_seconds = sum(r.get('seconds', 0.0) for r in runs)
    labeled = f'first {args.num_labeled} training images, ' if args.num_labeled else ''
    lines = [f'# MIM study: {args.labeled_root} (labeled, {labeled}{args.num_classes} classes) + '
             f'{args.unlabeled_root} (unlabeled)', '',
             f'Fine-tuning {args.ft_iters} iterations, seeds {args.seeds}; pretraining {args.mim_iters} iterations, '
             f'{args.pretrain_seeds} run(s) per arm'
             + (f'; dVAE {args.dvae_iters} iterations. ' if tokenizer else '. ')
             + (f'Fine-tuning options: {" ".join(args.ft_options)}. ' if args.ft_options else '')
             + (f'Pretrained arms keep the random init of {args.ft_keep_init}. ' if args.ft_keep_init else '')
             + (f'Tokenizers and pretraining runs from {args.pretrain_dir}. ' if args.pretrain_dir != args.work_dir
                else '') + 'Mean ± sample std over '
             f'seeds. Wall time {seconds / 60:.1f} min with --jobs {args.jobs} (this invocation; runs finished by '
             f'an earlier one in the work dir are reused); the runs\' own times add up to {run_seconds / 60:.1f} '
             'min.', '']
    if tokenizer:
        lines += [f'Tokenizer (held-out {args.labeled_root}/images/validation): codebook usage '
                  f'{tokenizer["usage"]:.3f}, perplexity {tokenizer["perplexity"]:.1f} '
                  f'({tokenizer["perplexity_fraction"]:.3f} of the vocabulary), PSNR {tokenizer["psnr"]:.2f} dB '
                  f'(mean-colour baseline {tokenizer["psnr_mean_colour"]:.2f} dB); grid {tokenizer["grid"]}.', '']
    if vqkd:
        lines += [f'VQ-KD tokenizer of vqkd-blockwise ({args.vqkd_iters} iterations, teacher = the '
                  f'{args.vqkd_teacher} backbone {vqkd["teacher_checkpoint"]}, dead_code_ratio '
                  f'{args.vqkd_dead_code_ratio}; held-out {args.labeled_root}/images/validation): codebook usage '
                  f'{vqkd["usage"]:.3f} ({vqkd["dead_codes"]} dead codes), perplexity {vqkd["perplexity"]:.1f}, '
                  f'teacher-feature cosine {vqkd["teacher_cosine"]:.3f}.', '']
    if teacher and vqkd_supervised:
        lines += [f'VQ-KD tokenizer of vqkd-supervised (same recipe; teacher = the last block of a {args.teacher_head} '
                  f'segmentor trained from random init with the labels of {args.teacher_labeled_root} '
                  f'({args.teacher_num_classes} classes, {args.teacher_iters} iterations; its validation mIoU there '
                  f'{teacher["mIoU"]:.2f}), so it knows classes the pretraining pool has no labels for): codebook '
                  f'usage {vqkd_supervised["usage"]:.3f} ({vqkd_supervised["dead_codes"]} dead codes), perplexity '
                  f'{vqkd_supervised["perplexity"]:.1f}, teacher-feature cosine '
                  f'{vqkd_supervised["teacher_cosine"]:.3f}.', '']
    probe_base = next(res['probe'][0] for res in results.values())
    lines += ['Pretraining and frozen features (dense probe of the layers a segmentor reads, on the labeled set\'s '
              'validation patches; beit_mm.evaluation.probe):', '',
              '| arm | MIM end metric | probe mIoU | probe mAcc | k-NN acc |', '|---|---|---|---|---|',
              f'| trivial baseline (majority class) | - | {probe_base["majority_mIoU"]:.2f} | '
              f'{probe_base["majority_mAcc"]:.2f} | {probe_base["majority_aAcc"]:.2f} |']
    for arm, res in results.items():
        pre = res['pretrain']
        if not pre:
            mim = '- (random init)'
        elif 'mim_acc' in pre[0]:
            mim = (f'mim_acc {fmt([100 * p["mim_acc"] for p in pre])} (most frequent token '
                   f'{fmt([100 * p["mim_acc_baseline"] for p in pre])})')
        else:
            mim = (f'L2 {fmt([p["loss"] for p in pre])} (predict-the-mean {fmt([p["loss_baseline"] for p in pre])})')
        probes = res['probe']
        lines.append(f'| {arm} | {mim} | {fmt([p["probe_mIoU"] for p in probes])} | '
                     f'{fmt([p["probe_mAcc"] for p in probes])} | {fmt([p["knn_acc"] for p in probes])} |')
    warnings = probe_warnings(results)
    if warnings:
        lines += [''] + warnings
    lines += feature_table(results)
    for head in args.heads:
        lines += ['', f'Fine-tuning with the {head} decoder ({osp.basename(FT_CONFIGS[head])}):', '',
                  '| arm | mIoU | mIoU per seed | aAcc | mAcc |', '|---|---|---|---|---|',
                  f'| trivial baseline (majority class) | {baseline["mIoU"]:.2f} | - | {baseline["aAcc"]:.2f} | '
                  f'{baseline["mAcc"]:.2f} |']
        for arm, res in results.items():
            ft = res['finetune'][head]
            per_seed = ', '.join(f'{r["mIoU"]:.2f}' for r in ft)
            lines.append(f'| {arm} | {fmt([r["mIoU"] for r in ft])} | {per_seed} | {fmt([r["aAcc"] for r in ft])} | '
                         f'{fmt([r["mAcc"] for r in ft])} |')
        if 'scratch' in results:
            m0, s0 = mean_std([r['mIoU'] for r in results['scratch']['finetune'][head]])
            lines.append('')
            for arm in (a for a in results if a != 'scratch'):
                m1, s1 = mean_std([r['mIoU'] for r in results[arm]['finetune'][head]])
                verdict = 'more' if abs(m1 - m0) > s1 + s0 else 'not more'
                lines.append(f'- {head}: {arm} - scratch = {m1 - m0:+.2f} mIoU; the sum of the two standard '
                             f'deviations is {s1 + s0:.2f}: the difference is {verdict} than the spread.')
    return '\n'.join(lines) + '\n'


def plot_probe_curves(curves: dict, path: str) -> str | None:
    """Every pretrained arm's dense-probe mIoU over pretraining (``DenseProbeHook`` curves ``{arm: curve}``,
    pretraining run 0) in one picture, with the random-init and majority-class levels; returns the path, or None
    without curves."""
    curves = {arm: curve for arm, curve in curves.items() if curve}
    if not curves:
        return None
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for arm, curve in curves.items():
        points = [dict(curve['init'], iter=0)] + curve['history']
        ax.plot([p['iter'] for p in points], [p['probe_mIoU'] for p in points], marker='o', label=arm)
    first = next(iter(curves.values()))
    ax.axhline(first['init']['probe_mIoU'], color='grey', ls='--', lw=1,
               label=f'random init (iteration 0, first arm) {first["init"]["probe_mIoU"]:.2f}')
    ax.axhline(first['init']['majority_mIoU'], color='black', ls=':', lw=1,
               label=f'majority class {first["init"]["majority_mIoU"]:.2f}')
    ax.set_xlabel('pretraining iteration')
    ax.set_ylabel('dense linear-probe mIoU (frozen)')
    blocks = first['layers'] if first['layers'] is not None else "the segmentor's"
    ax.set_title(f'Dense probe during MIM pretraining ({first["num_classes"]} classes, blocks {blocks})', fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format='png')
    plt.close(fig)
    return path


def parse_args() -> argparse.Namespace:
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
    args = parser.parse_args()
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


# Task kinds in the order ready tasks start (tokenizer and pretraining gate everything after them).
PRIORITY = ('tokenizer', 'teacher', 'pretrain', 'vqkd', 'vqkd_supervised', 'finetune', 'probe')


def run_graph(tasks: dict[str, tuple[list[str], Callable[[dict], dict]]], jobs: int) -> dict[str, dict]:
    """Run ``{name: (dependencies, fn(done) -> result)}`` with up to ``jobs`` at a time, each once all its
    dependencies are done (``done`` maps finished names to results); the first failure stops the study."""
    done: dict[str, dict] = {}
    running: dict[Future, str] = {}
    waiting = dict(tasks)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            ready = [n for n, (deps, _) in waiting.items() if all(d in done for d in deps)]
            for name in sorted(ready, key=lambda n: PRIORITY.index(n.split('/')[0])):  # the critical path first
                if len(running) >= jobs:
                    break
                running[pool.submit(waiting.pop(name)[1], dict(done))] = name
            if not running:
                raise RuntimeError(f'unresolvable dependencies: {sorted(waiting)}')
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                done[name] = future.result()
                print(f'[mim_study] done {name}: {_short(done[name])}', flush=True)
    return done


def _short(metrics: dict) -> str:
    return ' '.join(f'{k} {v:.4g}' for k, v in metrics.items() if isinstance(v, float))


def check_work_dirs(args) -> None:
    """The work dir and the pretraining dir, before anything is written (:func:`beit_mm.fileio.outputs.check_output`):
    folders the study adds runs to and reuses (so they may exist), never a link, a data root or a folder inside one."""
    from beit_mm.fileio.outputs import OutputError, check_output
    inputs = [args.labeled_root, args.unlabeled_root, args.teacher_labeled_root]
    try:
        for folder in dict.fromkeys((args.work_dir, args.pretrain_dir)):
            check_output(folder, overwrite=True, kind='dir', inputs=inputs)
    except OutputError as error:
        raise SystemExit(f'mim_study: {error}') from None


def main() -> None:
    args = parse_args()
    start = time.time()
    check_work_dirs(args)
    configs = study_configs(args)
    from mmengine.config import Config

    from beit_mm.evaluation.probe import DenseProbe, LabeledDataError, load_seg_split
    try:
        check_unlabeled(args, configs)
        available = len(labeled_dataset(args, configs, 'training', subset=False))
        if args.num_labeled is not None and args.num_labeled > available:
            raise SystemExit(f'mim_study: --num-labeled {args.num_labeled} is more than the {available} images of '
                             f'{args.labeled_root}/images/training')
        train_set, val_set = labeled_dataset(args, configs, 'training'), labeled_dataset(args, configs, 'validation')
    except LabeledDataError as e:
        raise SystemExit(f'mim_study: {e}')
    baseline = majority_baseline(train_set, val_set)
    probe_size = Config.fromfile(configs[f'finetune-{args.heads[0]}']).crop_size[0]
    probe = DenseProbe(load_seg_split(train_set, probe_size), load_seg_split(val_set, probe_size))
    if args.jobs > 1:  # runs share the cores: one thread each (also for the in-process linear probes)
        os.environ['OMP_NUM_THREADS'] = str(max(1, (os.cpu_count() or 1) // args.jobs))
        import torch
        torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
    tokenizers = {TOKENIZER_OF[a] for a in pretrained_arms(args) if a in TOKENIZER_OF}

    def checkpoint(done: dict, source: str | None) -> str | None:
        return None if source is None else done[source]['checkpoint']

    tasks: dict[str, tuple[list[str], Callable[[dict], dict]]] = {}
    if 'tokenizer' in tokenizers:
        tasks['tokenizer'] = ([], lambda done: run_tokenizer(args, configs))
    if 'vqkd' in tokenizers:
        teacher = f'pretrain/{args.vqkd_teacher}/0'
        tasks['vqkd'] = ([teacher], lambda done: run_vqkd(args, configs, done[teacher]['checkpoint']))
    if 'vqkd_supervised' in tokenizers:
        tasks['teacher'] = ([], lambda done: run_teacher(args, configs))
        tasks['vqkd_supervised'] = (['teacher'], lambda done: run_vqkd(args, configs, done['teacher']['checkpoint'],
                                                                       'vqkd_supervised'))
    for arm in pretrained_arms(args):
        deps = [TOKENIZER_OF[arm]] if arm in TOKENIZER_OF else []
        for s in range(args.pretrain_seeds if arm in args.arms else 1):  # a teacher-only arm: its run 0
            tasks[f'pretrain/{arm}/{s}'] = (deps, lambda done, arm=arm, s=s: run_pretrain(args, configs, arm, s))
    for arm in args.arms:
        pretrain_seeds = [] if arm == 'scratch' else list(range(args.pretrain_seeds))
        sources = [f'pretrain/{arm}/{s}' for s in pretrain_seeds] or [None]
        for s, source in enumerate(sources):
            tasks[f'probe/{arm}/{s}'] = ([source] if source else [], lambda done, arm=arm, s=s, source=source: cached(
                osp.join(args.work_dir, 'dense_probe', f'{arm}_seed{s}'),
                lambda: frozen_probe(args, configs, probe, checkpoint(done, source), s),
                dict(labeled_settings(args), mim_iters=None if source is None else args.mim_iters)))
        for head in args.heads:
            for i, seed in enumerate(args.seeds):
                source = sources[i % len(sources)]
                tasks[f'finetune/{head}/{arm}/{seed}'] = ([source] if source else [], lambda done, head=head, arm=arm,
                                                          seed=seed, source=source: run_finetune(
                                                              args, configs, head, arm, checkpoint(done, source), seed))
    done = run_graph(tasks, args.jobs)
    tokenizer = done.get('tokenizer')
    results = {}
    for arm in args.arms:
        pick = lambda kind: [done[k] for k in sorted((k for k in done if k.startswith(f'{kind}/{arm}/')),  # noqa: E731
                                                     key=lambda k: int(k.rsplit('/', 1)[1]))]
        results[arm] = dict(pretrain=pick('pretrain'), probe=pick('probe'),
                            finetune={head: pick(f'finetune/{head}') for head in args.heads})
    seconds = time.time() - start
    text = report(args, results, tokenizer, done.get('vqkd'), baseline, seconds, done.get('teacher'),
                  done.get('vqkd_supervised'))
    curves = {(arm if arm in args.arms else f'{arm} (VQ-KD teacher)'):
              probe_curve(done[f'pretrain/{arm}/0']['checkpoint']) for arm in pretrained_arms(args)}
    picture = plot_probe_curves(curves, osp.join(args.work_dir, 'probe_curves.png'))
    if picture:
        text += f'\nProbe curves over pretraining: {picture}\n'
    with atomic_file(osp.join(args.work_dir, 'report.md')) as tmp, open(tmp, 'w') as f:
        f.write(text)
    with atomic_file(osp.join(args.work_dir, 'report.json')) as tmp, open(tmp, 'w') as f:
        json.dump(dict(args=vars(args), baseline=baseline, tokenizer=tokenizer, vqkd=done.get('vqkd'),
                       teacher=done.get('teacher'), vqkd_supervised=done.get('vqkd_supervised'), results=results,
                       seconds=round(seconds, 1)), f, indent=1)
    print(text)


if __name__ == '__main__':
    main()
