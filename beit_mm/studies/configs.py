"""The MIM study's configs: the shipped files of ``configs/studies/`` and the edits that point them at a study's data
roots, class count and iteration counts (:func:`study_configs`), written to ``<work dir>/configs/``.
:func:`rescale_iterations` is the one rule for changing a config's length: every iteration-valued field moves with
``train_cfg.max_iters``.
"""
from __future__ import annotations

import inspect
import os.path as osp
from collections.abc import Callable
from typing import TYPE_CHECKING

from beit_mm.fileio.outputs import atomic_file

if TYPE_CHECKING:
    from mmengine.config import Config, ConfigDict

# the shipped study configs, relative to the config folder
STUDY = 'studies'
DVAE_CONFIG = osp.join(STUDY, 'dvae-tiny-v256_1xb32-1k_shapes-64px.py')
MIM_CONFIGS = {
    'tokens-blockwise': osp.join(STUDY, 'beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py'),
    'pixels-blockwise': osp.join(STUDY, 'beit_beit-tiny-p8_pixels-blockwise_1xb32-coslr-3k_shapes-64px.py'),
    'tokens-random': osp.join(STUDY, 'beit_beit-tiny-p8_tokens-random_1xb32-coslr-3k_shapes-64px.py'),
    'vqkd-blockwise': osp.join(STUDY, 'beit_beit-tiny-p8_vqkd-blockwise_1xb32-coslr-3k_shapes-64px.py'),
    # the same MIM recipe; its VQ-KD tokenizer is distilled from a backbone trained with labels on another dataset
    'vqkd-supervised': osp.join(STUDY, 'beit_beit-tiny-p8_vqkd-blockwise_1xb32-coslr-3k_shapes-64px.py'),
}
VQKD_CONFIG = osp.join(STUDY, 'vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py')
# The arms with a tokenizer: the task that trains it and the file (in the pretraining dir) its MIM config reads.
TOKENIZER_OF = {'tokens-blockwise': 'tokenizer', 'tokens-random': 'tokenizer', 'vqkd-blockwise': 'vqkd',
                'vqkd-supervised': 'vqkd_supervised'}
TOKENIZER_FILES = {'tokenizer': 'tokenizer.pth', 'vqkd': 'vqkd_tokenizer.pth',
                   'vqkd_supervised': 'vqkd_supervised_tokenizer.pth'}
FT_CONFIGS = {  # fine-tuning decoders: the same backbone, data, optimizer and schedule
    'linear': osp.join(STUDY, 'beit-tiny-p8_beit-pre_linear_1xb8-1.2k_shapes-64x64.py'),
    'upernet': osp.join(STUDY, 'beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py'),
    'eomt': osp.join(STUDY, 'beit-tiny-p8_beit-pre_eomt_1xb8-1.2k_shapes-64x64.py'),
    'mask2former': osp.join(STUDY, 'beit-tiny-p8_beit-pre_mask2former_1xb8-1.2k_shapes-64x64.py'),
}
ARMS = ('scratch', ) + tuple(MIM_CONFIGS)


class ConfigFolderError(FileNotFoundError):
    """The folder of the project's configs is not where a study looks; the message names it and the fix."""


def default_config_dir() -> str:
    """``configs/`` beside the ``beit_mm`` package (a source checkout, or an editable install of one): where the
    studies read their shipped configs unless their settings name another ``config_dir``."""
    return osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs')


def shipped_config(config_dir: str, rel_path: str) -> str:
    """The shipped config ``rel_path`` (relative to the config folder) in ``config_dir``; a missing file is a
    :class:`ConfigFolderError` naming the folder and the fix."""
    path = osp.join(config_dir, rel_path)
    if not osp.isfile(path):
        raise ConfigFolderError(f'{path} is missing: the study reads its configs from {config_dir}. Fix: run it from '
                                "a source checkout of beit_mm (its configs/ folder beside the package), or set the "
                                "settings' config_dir to a copy of that folder")
    return path


def rescale_iterations(cfg: Config, max_iters: int) -> None:
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


def write_config(src: str, dst: str, edit: Callable[[Config], None]) -> str:
    """Load ``src``, apply ``edit(cfg)``, dump the merged config to ``dst`` (atomically); return ``dst``."""
    from mmengine.config import Config
    cfg = Config.fromfile(src)
    edit(cfg)
    with atomic_file(dst) as tmp, open(tmp, 'w', encoding='utf-8') as f:  # Config.dump of a .py file, atomically
        f.write(cfg.pretty_text)
    return dst


def set_loader(loader: ConfigDict, root: str, workers: int) -> None:
    """Point a dataloader's dataset at ``root`` with ``workers`` worker processes."""
    loader.num_workers = workers
    loader.persistent_workers = workers > 0
    loader.dataset.data_root = root


def study_configs(args) -> dict[str, str]:
    """Write the study's configs for these data roots, class count and iteration counts (``args``: the MIM study's
    :class:`~beit_mm.studies.settings.MimStudySettings`, which imports this module) to ``<work dir>/configs/``;
    return their paths by task (``'dvae'``, ``'finetune-<head>'``, ``'vqkd'``, ``'teacher'``, ``'vqkd_supervised'``,
    ``<arm>``)."""
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
        seg = Config.fromfile(shipped(FT_CONFIGS[args.teacher_head])).model
        backbone = seg.backbone.to_dict()
        backbone.update(out_indices=(backbone['arch']['num_layers'] - 1, ), drop_path_rate=0.0,
                        init_cfg=dict(type='Pretrained', checkpoint='<the teacher run\'s checkpoint>',
                                      prefix='backbone.'))
        cfg.model.teacher.backbone = backbone
        cfg.model.teacher.mean = tuple(m / 255 for m in seg.data_preprocessor.mean)
        cfg.model.teacher.std = tuple(m / 255 for m in seg.data_preprocessor.std)

    def shipped(rel_path: str) -> str:
        return shipped_config(args.config_dir, rel_path)

    paths = {'dvae': write_config(shipped(DVAE_CONFIG), osp.join(out, 'dvae.py'), dvae)}
    for head in args.heads:
        paths[f'finetune-{head}'] = write_config(shipped(FT_CONFIGS[head]), osp.join(out, f'finetune_{head}.py'),
                                                 finetune)
    if 'vqkd-blockwise' in args.arms:
        paths['vqkd'] = write_config(shipped(VQKD_CONFIG), osp.join(out, 'vqkd.py'), vqkd)
    if 'vqkd-supervised' in args.arms:
        paths['teacher'] = write_config(shipped(FT_CONFIGS[args.teacher_head]),
                                        osp.join(out, f'teacher_{args.teacher_head}.py'), teacher)
        paths['vqkd_supervised'] = write_config(shipped(VQKD_CONFIG), osp.join(out, 'vqkd_supervised.py'),
                                                vqkd_supervised)
    for arm in pretrained_arms(args):
        paths[arm] = write_config(shipped(MIM_CONFIGS[arm]), osp.join(out, f'mim_{arm}.py'),
                                  lambda cfg, arm=arm: mim(cfg, arm))
    return paths


def pretrained_arms(args) -> list[str]:
    """The arms to pretrain: the MIM arms asked for, plus the VQ-KD teacher's arm when ``vqkd-blockwise`` is."""
    arms = [a for a in args.arms if a != 'scratch']
    if 'vqkd-blockwise' in arms and args.vqkd_teacher not in arms:
        arms.insert(0, args.vqkd_teacher)
    return arms