"""The MIM study: does MIM pretraining on an unlabeled pool help segmentation with few labels?

Its stages (tokenizers, pretraining arms, the frozen-feature probe, fine-tuning per decoder and seed) are tasks of one
job graph (:func:`study_tasks`), each a cached training run on the configs that
:func:`beit_mm.studies.configs.study_configs` wrote; :func:`run_study` runs them and writes the report. ``args`` is
the study's :class:`beit_mm.studies.settings.MimStudySettings`, data roots absolute.
"""
from __future__ import annotations

import inspect
import json
import os
import os.path as osp
import time
from dataclasses import asdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from beit_mm.fileio.outputs import atomic_file, check_output
from beit_mm.fileio.work_dir import check_replaceable, write_work_dir_file

from .configs import TOKENIZER_FILES, TOKENIZER_OF, pretrained_arms, study_configs
from .graph import run_graph
from .report import FEATURE_IMAGES, majority_baseline, mim_report, plot_probe_curves, recommendation
from .runs import cached, last_checkpoint, last_scalar, last_tokenizer_eval, probe_curve, train
from .settings import MimStudySettings

if TYPE_CHECKING:
    from beit_mm.evaluation.probe import DenseProbe


def run_tokenizer(args: MimStudySettings, configs: dict[str, str]) -> dict:
    work = osp.join(args.pretrain_dir, 'dvae')

    def run():
        from beit_mm.apis.convert import convert_checkpoint
        train(configs['dvae'], work, [f'randomness.seed={args.seeds[0]}'])
        convert_checkpoint(last_checkpoint(work), osp.join(args.pretrain_dir, 'tokenizer.pth'), model='dalle',
                           source='dvae')
        return last_tokenizer_eval(work)

    return cached(work, run, dict(unlabeled_root=args.unlabeled_root, dvae_iters=args.dvae_iters, seed=args.seeds[0]))


def teacher_settings(args: MimStudySettings) -> dict:
    """What the supervised teacher of ``vqkd-supervised`` depends on: the other dataset, its labels and budget."""
    return dict(teacher_labeled_root=args.teacher_labeled_root, teacher_num_classes=args.teacher_num_classes,
                teacher_head=args.teacher_head, teacher_iters=args.teacher_iters, seed=args.seeds[0])


def vqkd_settings(args: MimStudySettings, kind: str = 'vqkd') -> dict:
    teacher = (dict(teacher=args.vqkd_teacher, teacher_mim_iters=args.mim_iters) if kind == 'vqkd' else
               dict(teacher='supervised', **teacher_settings(args)))
    return dict(teacher, unlabeled_root=args.unlabeled_root, vqkd_iters=args.vqkd_iters,
                dead_code_ratio=args.vqkd_dead_code_ratio, seed=args.seeds[0])


def run_teacher(args: MimStudySettings, configs: dict[str, str]) -> dict:
    """The supervised teacher of ``vqkd-supervised``: the fine-tuning recipe (``--teacher-head``) trained from random
    init with the labels of ``--teacher-labeled-root`` (another dataset); its validation mIoU there and checkpoint."""
    work = osp.join(args.pretrain_dir, 'teacher')

    def run():
        train(configs['teacher'], work, [f'randomness.seed={args.seeds[0]}'])
        return dict(mIoU=last_scalar(work, 'mIoU'), aAcc=last_scalar(work, 'aAcc'), checkpoint=last_checkpoint(work))

    return cached(work, run, teacher_settings(args))


def run_vqkd(args: MimStudySettings, configs: dict[str, str], teacher_checkpoint: str,
             kind: str = 'vqkd') -> dict:
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


def run_pretrain(args: MimStudySettings, configs: dict[str, str], arm: str, seed: int) -> dict:
    work = osp.join(args.pretrain_dir, 'mim', f'{arm}_seed{seed}')

    def run():
        train(configs[arm], work, [f'randomness.seed={seed}'])
        metrics = dict(loss=last_scalar(work, 'loss'), checkpoint=last_checkpoint(work))
        keys = ('mim_acc', 'mim_acc_baseline') if arm in TOKENIZER_OF else ('loss_baseline', )
        metrics.update({key: last_scalar(work, key) for key in keys})
        return metrics

    settings = dict(unlabeled_root=args.unlabeled_root, mim_iters=args.mim_iters, seed=seed)
    if TOKENIZER_OF.get(arm, '').startswith('vqkd'):
        settings['tokenizer'] = vqkd_settings(args, TOKENIZER_OF[arm])
    return cached(work, run, settings)



def run_finetune(args: MimStudySettings, configs: dict[str, str], head: str, arm: str, checkpoint: str | None,
                 seed: int) -> dict:
    work = osp.join(args.work_dir, 'finetune', head, f'{arm}_seed{seed}')
    init = 'model.backbone.init_cfg=None' if checkpoint is None else f'model.backbone.init_cfg.checkpoint={checkpoint}'
    options = [f'randomness.seed={seed}', init, *args.ft_options]

    def run():
        train(configs[f'finetune-{head}'], work, options)
        return {key: last_scalar(work, key) for key in ('mIoU', 'aAcc', 'mAcc')}

    settings = dict(labeled_settings(args), ft_iters=args.ft_iters, seed=seed,
                    mim_iters=None if checkpoint is None else args.mim_iters)
    if args.ft_options:
        settings['ft_options'] = list(args.ft_options)
    if args.ft_keep_init and checkpoint is not None:
        settings['ft_keep_init'] = list(args.ft_keep_init)
    if checkpoint is not None and args.pretrain_dir != args.work_dir:
        settings['checkpoint'] = checkpoint
    return cached(work, run, settings)


def labeled_settings(args: MimStudySettings) -> dict:
    """What a fine-tuning or probe result depends on besides its own run: the labeled data it saw."""
    return dict(labeled_root=args.labeled_root, num_classes=args.num_classes, num_labeled=args.num_labeled)


# ------------------------------------------------------------------------------- labeled data and the probe
def labeled_dataset(args: MimStudySettings, configs: dict[str, str], split: str, subset: bool = True):
    """The fine-tuning config's training (``'training'``: its first ``--num-labeled`` images, all of them with
    ``subset=False``) or validation dataset, through mmseg's dataset class with the config's suffixes
    (``beit_mm.data.datasets.labeled_sets.build_seg_dataset``: an error names the suffix, the folder and the files found)."""
    from mmengine.config import Config

    from beit_mm.data.datasets.labeled_sets import build_seg_dataset
    cfg = Config.fromfile(configs[f'finetune-{args.heads[0]}'])  # the data are the same in every head's config
    dataset = (cfg.train_dataloader if split == 'training' else cfg.val_dataloader).dataset.to_dict()
    if not subset:
        dataset.pop('indices', None)
    return build_seg_dataset(dataset)


def check_unlabeled(args: MimStudySettings, configs: dict[str, str]) -> int:
    """The number of images in the unlabeled pool, as the tokenizer's and the MIM runs' dataset (mmpretrain's
    ``CustomDataset``, its image extensions) lists them; an error names the folder, the extensions and what it holds."""
    from mmengine.config import Config
    from mmpretrain.datasets import CustomDataset

    from beit_mm.data.datasets.labeled_sets import LabeledDataError, describe_files
    dataset = Config.fromfile(configs['dvae']).train_dataloader.dataset
    extensions = dataset.get('extensions') or inspect.signature(CustomDataset.__init__).parameters['extensions'].default
    folder = osp.join(dataset.data_root, dataset.data_prefix)
    found = sum(f.lower().endswith(tuple(extensions)) for _, _, files in os.walk(folder) for f in files)
    if not found:
        raise LabeledDataError(f'0 images matched {", ".join("*" + e for e in extensions)} in {folder} (the unlabeled '
                               f'pool); {describe_files(folder)}. Fix: --unlabeled-root needs its images under '
                               'images/training (any names, any of those suffixes)')
    return found


def frozen_probe(args: MimStudySettings, configs: dict[str, str], probe: DenseProbe, checkpoint: str | None,
                 seed: int) -> dict:
    """The dense probe (``beit_mm.evaluation.probe.DenseProbe`` of the labeled set) of the fine-tuning config's
    backbone with the pretrained weights (random ones drawn with ``seed`` for ``checkpoint=None``): probe mIoU / mAcc
    and k-NN accuracy on the validation patches of the layers a segmentor reads, and the majority class's numbers;
    ``features``: the start's per-block statistics (``beit_mm.evaluation.feature_stats``) on the first
    ``FEATURE_IMAGES`` validation images."""
    from beit_mm.evaluation.feature_stats import feature_statistics
    from beit_mm.models.builder import load_for_features
    model = load_for_features(configs[f'finetune-{args.heads[0]}'], checkpoint, seed)
    return dict(probe.evaluate(model), features=feature_statistics(model, probe.val.images[:FEATURE_IMAGES]))




def check_work_dirs(args: MimStudySettings) -> None:
    """The work dir and the pretraining dir, before anything is written (:func:`beit_mm.fileio.outputs.check_output`):
    folders the study adds runs to and reuses (so they may exist), never a link, a data root or a folder inside one.
    Raises ``OutputError``."""
    inputs = [args.labeled_root, args.unlabeled_root, args.teacher_labeled_root]
    for folder in dict.fromkeys((args.work_dir, args.pretrain_dir)):
        check_output(folder, overwrite=True, kind='dir', inputs=inputs)
    for name in ('report.md', 'report.json'):  # a user's file of that name is never replaced
        check_replaceable(args.work_dir, name)


def run_study(args: MimStudySettings) -> str:
    """The whole study: check the work dirs and the data, run every task (reusing finished runs), write
    ``report.md``, ``report.json`` and ``probe_curves.png`` to the work dir; return the report text.

    Raises ``OutputError`` (a work dir that may not be written) and ``LabeledDataError`` (data the study cannot read,
    or ``--num-labeled`` above the training images) before any run starts."""
    from mmengine.config import Config

    from beit_mm.data.datasets.labeled_sets import LabeledDataError, load_seg_split
    from beit_mm.evaluation.probe import DenseProbe
    start = time.time()
    check_work_dirs(args)
    configs = study_configs(args)
    check_unlabeled(args, configs)
    available = len(labeled_dataset(args, configs, 'training', subset=False))
    if args.num_labeled is not None and args.num_labeled > available:
        raise LabeledDataError(f'--num-labeled {args.num_labeled} is more than the {available} images of '
                               f'{args.labeled_root}/images/training')
    train_set, val_set = labeled_dataset(args, configs, 'training'), labeled_dataset(args, configs, 'validation')
    baseline = majority_baseline(train_set, val_set)
    probe_size = Config.fromfile(configs[f'finetune-{args.heads[0]}']).crop_size[0]
    probe = DenseProbe(load_seg_split(train_set, probe_size), load_seg_split(val_set, probe_size))
    if args.jobs > 1:  # runs share the cores: one thread each (also for the in-process linear probes)
        os.environ['OMP_NUM_THREADS'] = str(max(1, (os.cpu_count() or 1) // args.jobs))
        import torch
        torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
    done = run_graph(study_tasks(args, configs, probe), args.jobs)
    tokenizer = done.get('tokenizer')
    results = {}
    for arm in args.arms:
        pick = lambda kind: [done[k] for k in sorted((k for k in done if k.startswith(f'{kind}/{arm}/')),  # noqa: E731
                                                     key=lambda k: int(k.rsplit('/', 1)[1]))]
        results[arm] = dict(pretrain=pick('pretrain'), probe=pick('probe'),
                            finetune={head: pick(f'finetune/{head}') for head in args.heads})
    seconds = time.time() - start
    text = mim_report(args, results, tokenizer, done.get('vqkd'), baseline, seconds, done.get('teacher'),
                      done.get('vqkd_supervised'))
    curves = {(arm if arm in args.arms else f'{arm} (VQ-KD teacher)'):
              probe_curve(done[f'pretrain/{arm}/0']['checkpoint']) for arm in pretrained_arms(args)}
    picture = plot_probe_curves(curves, osp.join(args.work_dir, 'probe_curves.png'))
    if picture:
        text += f'\nProbe curves over pretraining: {picture}\n'
    write_work_dir_file(args.work_dir, 'report.md', text)
    write_work_dir_file(args.work_dir, 'report.json', json.dumps(dict(
        args=asdict(args), baseline=baseline, tokenizer=tokenizer, vqkd=done.get('vqkd'), teacher=done.get('teacher'),
        vqkd_supervised=done.get('vqkd_supervised'), results=results,
        recommendation=recommendation(results, args.heads), seconds=round(seconds, 1)), indent=1))
    return text


def study_tasks(args: MimStudySettings, configs: dict[str, str],
                probe: DenseProbe | None) -> dict[str, tuple[list[str], Callable[[dict], dict]]]:
    """The study's job graph (:func:`beit_mm.studies.graph.run_graph`): ``{name: (dependencies, fn(done))}`` with the
    names ``tokenizer``, ``vqkd``, ``teacher``, ``vqkd_supervised``, ``pretrain/<arm>/<run>``, ``probe/<arm>/<run>``
    and ``finetune/<head>/<arm>/<seed>``; ``probe``: the labeled set's ``DenseProbe``."""
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
    return tasks
