"""The full-size configs reproduce the published runs, checked against the reference code, not their own literals.

Reference code re-implemented here (read, not copied; cited per function):

- mmcv 1.x ``mmcv/runner/hooks/lr_updater.py``: ``LrUpdaterHook.before_train_iter``, ``get_warmup_lr``
  (``'linear'``) and ``PolyLrUpdaterHook.get_lr``, as unilm's and mmseg 0.x's segmentation runs used;
- unilm ``beit/semantic_segmentation/mmcv_custom/apex_runner/optimizer.py`` ``DistOptimizerHook.after_train_iter``
  (step when ``(iter + 1) % update_interval == 0``);
- unilm ``beit/utils.py`` ``cosine_scheduler``, used by ``run_beit_pretraining.py`` and ``run_class_finetuning.py``;
- unilm ``beit/optim_factory.py`` ``get_parameter_groups`` (line 65), ``get_num_layer_for_vit``,
  ``LayerDecayValueAssigner``; ``run_class_finetuning.py`` lines 465-499; ``run_beit_pretraining.py`` line 223;
- unilm ``beit/semantic_segmentation/mmcv_custom/layer_decay_optimizer_constructor.py``
  ``LayerDecayOptimizerConstructor.add_params`` (line 43) and its ``get_num_layer_for_vit``;
- unilm ``mmcv_custom/resize_transform.py`` ``SETR_Resize._resize_img`` (lines 173-188) with mmcv 1.x
  ``MultiScaleFlipAug`` scales ``(int(2560 * r), int(640 * r))`` and ``mmcv.rescale_size`` rounding."""
import copy
import glob
import math
import os
import types
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import PARAM_SCHEDULERS, init_default_scope
from torch import nn

from beit_mm.apis.testing import slide_tta_pipeline
from beit_mm.engine.hooks import BatchSizeCheckHook, batch_size_warning
from beit_mm.models.layers import gather_relative_position_bias, resize_rel_pos_bias_table

from ..conftest import ROOT
from .reference_recipes import RECIPES, find

IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]  # timm IMAGENET_DEFAULT_MEAN (unilm datasets.py)
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def _key(name: str) -> str:
    key = find(name)
    assert key is not None, f'{name} has no entry in tests/configs/reference_recipes.py RECIPES'
    return key


def _cfg_path(name: str) -> str:
    """configs/cvt/ for a CvT backbone (``cvt-13_...``, ``beit_cvt-13_...``), else configs/beit/."""
    folder = 'cvt' if name.split('_')[1 if name.startswith('beit_') else 0].startswith('cvt') else 'beit'
    return os.path.join(ROOT, 'configs', folder, name)


# ---- The published runs (numbers from the reference configs/commands; the source of each is cited).

def _runs(*keys: str) -> Dict[str, Dict[str, object]]:
    """Config file name -> the published values ``keys`` (tests/configs/reference_recipes.py) of every full-size config
    that has all of them."""
    out = {}
    for path, refs in RECIPES.items():
        if all(k in refs for k in keys):
            out[os.path.basename(path)] = {k: refs[k].value for k in keys}
    return out


# mmcv poly + linear warmup runs (unilm / mmseg 0.x): total iterations, update interval, warmup iterations, lr.
MMCV_RUNS = _runs('schedule.max_iters', 'accumulate', 'schedule.warmup', 'optimizer.lr', 'schedule.poly_power')
MMCV_WARMUP_RATIO = 1e-6  # every run above: warmup_ratio=1e-6, power=1.0, min_lr=0.0 (pinned in the table too)

# unilm cosine_scheduler runs (one lr per update): epochs, warmup epochs, lr, min_lr.
# (CvT's own ImageNet runs warm up from 1e-6 with timm's per-epoch scheduler: their values are pinned by
# test_config_has_the_published_values.)
UNILM_COSINE_RUNS = {name: run for name, run in
                     _runs('schedule.max_epochs', 'schedule.warmup', 'optimizer.lr', 'schedule.min_lr').items()
                     if 'schedule.warmup_start_lr' not in RECIPES[find(name)]}
ITERS_PER_EPOCH = 7  # stands in for len(ImageNet) // 2048 = 625; the reference is computed with the same value


def mmcv_lr(base_lr: float, it: int, max_iters: int, warmup_iters: int, warmup_ratio: float) -> float:
    """mmcv 1.x lr at iteration ``it``: PolyLrUpdaterHook.get_lr (power 1, min_lr 0) times the linear warmup of
    LrUpdaterHook.get_warmup_lr while ``it < warmup_iters`` (LrUpdaterHook.before_train_iter)."""
    regular = base_lr * (1 - it / max_iters)**1.0
    if it < warmup_iters:
        k = (1 - it / warmup_iters) * (1 - warmup_ratio)
        return regular * (1 - k)
    return regular


def mmcv_run(base_lr: float, iters: int, interval: int, warmup: int) -> List[float]:
    """lr of every optimizer update of the mmcv run: the updates happen at iterations with (it + 1) % interval == 0
    (DistOptimizerHook / GradientCumulativeOptimizerHook), with the lr set at the start of that iteration."""
    return [mmcv_lr(base_lr, it, iters, warmup, MMCV_WARMUP_RATIO) for it in range(iters) if (it + 1) % interval == 0]


def unilm_cosine_scheduler(base_value: float, final_value: float, epochs: int, niter_per_ep: int,
                           warmup_epochs: int) -> np.ndarray:
    """unilm beit/utils.py cosine_scheduler (start_warmup_value=0, warmup_steps=-1)."""
    warmup_iters = warmup_epochs * niter_per_ep
    warmup_schedule = np.linspace(0, base_value, warmup_iters) if warmup_epochs > 0 else np.array([])
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = np.array(
        [final_value + 0.5 * (base_value - final_value) * (1 + math.cos(math.pi * i / len(iters))) for i in iters])
    return np.concatenate((warmup_schedule, schedule))


def simulate(cfg: Config, iters: int, epoch_length: Optional[int]) -> List[float]:
    """lr of every optimizer update of an MMEngine run of ``cfg``: the config's optim wrapper (its type and
    ``accumulative_counts``) around a one-parameter stand-in model, the config's ``param_scheduler`` built as the
    Runner builds it (``convert_to_iter_based`` with ``epoch_length``), stepped after every iteration as
    ``ParamSchedulerHook.after_train_iter`` does; an update happens where the wrapper's ``should_update()`` says so
    (``OptimWrapper.update_params``)."""
    model = nn.Linear(1, 1, bias=False)
    wrapper_cfg = copy.deepcopy(cfg.optim_wrapper)
    wrapper_cfg.pop('constructor', None)
    wrapper_cfg.pop('paramwise_cfg', None)
    wrapper_cfg.pop('clip_grad', None)
    if 'Amp' in wrapper_cfg['type']:  # bf16 autocast plays no part in the count and lr of updates
        wrapper_cfg = dict(type='OptimWrapper', optimizer=wrapper_cfg['optimizer'],
                           accumulative_counts=wrapper_cfg.get('accumulative_counts', 1))
    wrapper = build_optim_wrapper(model, wrapper_cfg)
    wrapper.initialize_count_status(model, 0, iters)
    schedulers = []
    for sched in copy.deepcopy(cfg.param_scheduler):
        sched = dict(sched)
        if sched.pop('convert_to_iter_based', False):
            cls = PARAM_SCHEDULERS.get(sched.pop('type'))
            schedulers.append(cls.build_iter_from_epoch(wrapper, epoch_length=epoch_length, **sched))
        else:
            schedulers.append(PARAM_SCHEDULERS.build(dict(sched, optimizer=wrapper)))
    lrs = []
    group = wrapper.optimizer.param_groups[0]
    for _ in range(iters):
        wrapper._inner_count += 1  # what OptimWrapper.backward counts
        if wrapper.should_update():
            lrs.append(group['lr'])
        for scheduler in schedulers:
            scheduler.step()
    return lrs


def _warmup_updates(lrs: Sequence[float]) -> int:
    """Updates before the lr peaks (the warmup length in updates)."""
    return int(np.argmax(np.asarray(lrs)))


CHECK_UPDATES = (0, 1, 2, 749, 1499, 1500, 1501, 40000, 80000, 120000, 159998, 159999)


@pytest.mark.parametrize('name', sorted(MMCV_RUNS), ids=str)
def test_segmentation_schedule_matches_published_run(name):
    """Optimizer updates, warmup length in updates and the lr at chosen updates equal the mmcv run's."""
    run = MMCV_RUNS[name]
    cfg = Config.fromfile(_cfg_path(name))
    init_default_scope(cfg.default_scope)
    ours = simulate(cfg, cfg.train_cfg.max_iters, None)
    ref = mmcv_run(run['optimizer.lr'], run['schedule.max_iters'], run['accumulate'], run['schedule.warmup'])
    assert len(ours) == len(ref) == 160000  # 160k optimizer updates in every published run
    assert _warmup_updates(ours) == _warmup_updates(ref) == 1500  # warmup iterations / update interval
    for update in CHECK_UPDATES:
        assert ours[update] == pytest.approx(ref[update], rel=1e-6, abs=1e-14), update
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-14)


@pytest.mark.parametrize('name', sorted(UNILM_COSINE_RUNS), ids=str)
def test_imagenet_schedule_matches_unilm(name):
    """Per-update lr of the ImageNet MIM / fine-tuning configs equals unilm's cosine_scheduler (epochs x an epoch
    length, warmup from 0), for a stand-in epoch length."""
    run = UNILM_COSINE_RUNS[name]
    epochs, warmup, lr = run['schedule.max_epochs'], run['schedule.warmup'], run['optimizer.lr']
    cfg = Config.fromfile(_cfg_path(name))
    init_default_scope(cfg.default_scope)
    total = epochs * ITERS_PER_EPOCH
    ours = np.asarray(simulate(cfg, total, ITERS_PER_EPOCH))
    ref = unilm_cosine_scheduler(lr, run['schedule.min_lr'], epochs, ITERS_PER_EPOCH, warmup)
    assert len(ours) == len(ref) == total
    assert _warmup_updates(ours) == _warmup_updates(ref) == warmup * ITERS_PER_EPOCH - 1
    # lr at the first update is 0 in unilm and 1e-9 x lr here (MMEngine's LinearLR needs start_factor > 0)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=2e-9 * lr)


# ---- Every published value of tests/configs/reference_recipes.py vs the config, built through MMEngine

def _find(pipeline, name: str) -> Optional[dict]:
    """The first transform of ``pipeline`` whose type is ``name`` (with or without a ``beit_mm.`` scope)."""
    found = [t for t in pipeline if t['type'].split('.')[-1] == name]
    return found[0] if found else None


def _train(cfg: Config) -> list:
    return cfg.train_dataloader.dataset.pipeline


def _crop(cfg: Config) -> Optional[dict]:
    """mmseg's RandomCrop, or beit_mm's with the same draws (the category check on a histogram)."""
    return _find(_train(cfg), 'RandomCrop') or _find(_train(cfg), 'HistogramRandomCrop')


def _photometric_distortion(cfg: Config) -> bool:
    """mmseg's PhotoMetricDistortion on the worker, or its draws there and the distortion in the data preprocessor."""
    if _find(_train(cfg), 'PhotoMetricDistortion') is not None:
        return True
    return (_find(_train(cfg), 'SamplePhotoMetricDistortion') is not None
            and _preprocessor(cfg).type.split('.')[-1] == 'PhotoMetricSegDataPreProcessor')


def _two_view(cfg: Config) -> Optional[dict]:
    """The MIM two-view crop of the train pipeline: ``TwoViewRandomResizedCrop``, ``DecodeTwoViewRandomResizedCrop`` or
    ``EncodedTwoViewRandomResizedCrop`` (the same parameters; the latter two also flip)."""
    return (_find(_train(cfg), 'TwoViewRandomResizedCrop') or _find(_train(cfg), 'DecodeTwoViewRandomResizedCrop')
            or _find(_train(cfg), 'EncodedTwoViewRandomResizedCrop'))


def _rrc(cfg: Config) -> Optional[dict]:
    """The classification random resized crop: ``RandomResizedCrop``, ``DecodeRandomResizedCrop`` or
    ``EncodedRandomResizedCrop`` (the same parameters; the last also flips)."""
    return (_find(_train(cfg), 'RandomResizedCrop') or _find(_train(cfg), 'DecodeRandomResizedCrop')
            or _find(_train(cfg), 'EncodedRandomResizedCrop'))


def _color_jitter(cfg: Config) -> Optional[dict]:
    """The train pipeline's ColorJitter: mmpretrain's (applied on the worker) or ``SampleColorJitter`` (its
    parameters drawn on the worker, applied by the data preprocessor)."""
    return _find(_train(cfg), 'ColorJitter') or _find(_train(cfg), 'SampleColorJitter')


def _test(cfg: Config) -> list:
    return cfg.test_dataloader.dataset.pipeline


def _preprocessor(cfg: Config):
    return cfg.model.get('data_preprocessor') or cfg.data_preprocessor


def _arch(cfg: Config) -> dict:
    from beit_mm.models.backbones.beit import ARCHS
    from beit_mm.models.backbones.cvt import ARCH_SETTINGS
    arch = cfg.model.backbone.arch
    return dict(arch) if not isinstance(arch, str) else (ARCH_SETTINGS.get(arch) or ARCHS[arch])


def _rand_augment(cfg: Config) -> Optional[dict]:
    """The train pipeline's RandAugment: mmpretrain's (applied on the worker) or ``SampleRandAugment`` (its draws made
    on the worker, the ops applied by the data preprocessor, which must then be ``AugmentClsDataPreprocessor``)."""
    return _find(_train(cfg), 'RandAugment') or _device_augment(cfg, 'SampleRandAugment')


def _random_erasing(cfg: Config) -> Optional[dict]:
    """The train pipeline's RandomErasing: mmpretrain's or ``SampleRandomErasing`` (as :func:`_rand_augment`)."""
    return _find(_train(cfg), 'RandomErasing') or _device_augment(cfg, 'SampleRandomErasing')


def _device_augment(cfg: Config, name: str) -> Optional[dict]:
    found = _find(_train(cfg), name)
    if found is not None:
        assert _preprocessor(cfg).type.split('.')[-1] == 'AugmentClsDataPreprocessor', (
            f'{name} draws what only beit_mm.AugmentClsDataPreprocessor applies; the config has {_preprocessor(cfg)}')
    return found


def _randaugment(cfg: Config) -> Optional[str]:
    """timm's name of the config's RandAugment ('rand-m9-mstd0.5-inc1'), or None without one."""
    ra = _rand_augment(cfg)
    if ra is None:
        return None
    assert (ra.policies, ra.num_policies, ra.total_level) == ('timm_increasing', 2, 10), ra
    return f'rand-m{ra.magnitude_level}-mstd{ra.magnitude_std}-inc1'


def _pixel_normal_erasing(cfg: Config) -> bool:
    """Random erasing fills with N(0, 1) in the normalized space of the config's own data preprocessor (timm
    ``remode='pixel'``): mmpretrain's 'rand' mode draws ``fill_color + fill_std * N(0, 1)`` per pixel of the BGR
    image, so fill_color / fill_std must be the preprocessor's mean / std in BGR order."""
    erase = _random_erasing(cfg)
    pre = _preprocessor(cfg)
    bgr = (lambda v: list(v)[::-1]) if pre.get('to_rgb', pre.get('bgr_to_rgb', False)) else list
    return (erase.mode == 'rand' and np.allclose(erase.fill_color, bgr(pre.mean), rtol=0, atol=1e-9)
            and np.allclose(erase.fill_std, bgr(pre.std), rtol=0, atol=1e-9))


def _warmup(cfg: Config) -> float:
    """Warmup length as the reference counts it: epochs for per-epoch configs (LinearLR ``end``); for iteration configs
    mmcv's warmup_iters = the first iteration at full lr (MMEngine's LinearLR reaches factor 1 at ``end - 1``)."""
    warm = cfg.param_scheduler[0]
    assert warm.type == 'LinearLR' and warm.begin == 0, warm
    return warm.end if warm.by_epoch else warm.end - 1


def _min_lr(cfg: Config) -> float:
    decay = cfg.param_scheduler[-1]
    return decay.eta_min if 'eta_min_ratio' not in decay else decay.eta_min_ratio * cfg.optim_wrapper.optimizer.lr


def _is_amp(cfg: Config) -> bool:
    """Whether the config trains in mixed precision: beit_mm's AmpOptimWrapper (MMEngine's asserts CUDA)."""
    return cfg.optim_wrapper.get('type', 'OptimWrapper') == 'beit_mm.AmpOptimWrapper'


READERS: Dict[str, Callable[[Config], object]] = {
    # randomness and cuDNN as the run sets them (MMEngine's randomness.deterministic forces cudnn.benchmark off and
    # calls torch.use_deterministic_algorithms; env_cfg.cudnn_deterministic is tools/train.py's cudnn-only flag)
    'seed': lambda c: (c.get('randomness') or {}).get('seed'),
    'seed.per_rank': lambda c: bool((c.get('randomness') or {}).get('diff_rank_seed', False)),
    'seed.deterministic_algorithms': lambda c: bool((c.get('randomness') or {}).get('deterministic', False)),
    'cudnn.deterministic': lambda c: bool(c.env_cfg.get('cudnn_deterministic', False)
                                          or (c.get('randomness') or {}).get('deterministic', False)),
    'cudnn.benchmark': lambda c: bool(c.env_cfg.get('cudnn_benchmark', False)
                                      and not (c.get('randomness') or {}).get('deterministic', False)),
    # precision: mixed (beit_mm.AmpOptimWrapper) or fp32, and the dtype / loss scaling the wrapper is given
    'precision.amp': lambda c: _is_amp(c),
    'precision.dtype': lambda c: c.optim_wrapper.get('dtype'),
    'precision.loss_scale': lambda c: c.optim_wrapper.get('loss_scale', 'dynamic') if _is_amp(c) else None,
    # the MIM tokenizer computes its ids in reduced precision (its own autocast dtype; docs/studies/
    # tokenizer-precision.md)
    'tokenizer.reduced_precision': lambda c: c.model.target_generator.get('autocast_dtype') is not None,
    # model
    'model.img_size': lambda c: c.model.backbone.img_size,
    'model.layer_scale': lambda c: c.model.backbone.layer_scale_init_value,
    'model.drop_path': lambda c: c.model.backbone.drop_path_rate,
    'model.drop_path_per_stage': lambda c: list(c.model.backbone.drop_path_rate),
    'model.out_indices': lambda c: tuple(c.model.backbone.out_indices),
    'model.num_layers': lambda c: _arch(c)['num_layers'],
    'model.embed_dims': lambda c: _arch(c)['embed_dims'],
    'model.depths': lambda c: list(_arch(c)['depths']),
    'model.neck_rescales': lambda c: list(c.model.neck.rescales),
    'decode.in_channels': lambda c: list(c.model.decode_head.in_channels),
    'decode.channels': lambda c: c.model.decode_head.channels,
    'decode.num_classes': lambda c: c.model.decode_head.num_classes,
    'decode.in_index': lambda c: list(c.model.decode_head.in_index),
    'decode.pool_scales': lambda c: tuple(c.model.decode_head.pool_scales),
    'decode.dropout_ratio': lambda c: c.model.decode_head.dropout_ratio,
    'decode.loss_weight': lambda c: c.model.decode_head.loss_decode.loss_weight,
    'aux.in_channels': lambda c: c.model.auxiliary_head.in_channels,
    'aux.in_index': lambda c: c.model.auxiliary_head.in_index,
    'aux.channels': lambda c: c.model.auxiliary_head.channels,
    'aux.num_convs': lambda c: c.model.auxiliary_head.num_convs,
    'aux.concat_input': lambda c: c.model.auxiliary_head.concat_input,
    'aux.loss_weight': lambda c: c.model.auxiliary_head.loss_decode.loss_weight,
    'head.init_std': lambda c: c.model.head.init_cfg.std,
    # optimizer and schedule
    'optimizer.type': lambda c: c.optim_wrapper.optimizer.type,
    'optimizer.lr': lambda c: c.optim_wrapper.optimizer.lr,
    'optimizer.betas': lambda c: tuple(c.optim_wrapper.optimizer.betas),
    'optimizer.weight_decay': lambda c: c.optim_wrapper.optimizer.weight_decay,
    'optimizer.momentum': lambda c: c.optim_wrapper.optimizer.momentum,
    'layer_decay': lambda c: c.optim_wrapper.paramwise_cfg.layer_decay_rate,
    'clip_grad': lambda c: (c.optim_wrapper.get('clip_grad') or {}).get('max_norm'),
    'total_batch': lambda c: 8 * c.train_dataloader.batch_size * c.optim_wrapper.get('accumulative_counts', 1),
    'accumulate': lambda c: c.optim_wrapper.get('accumulative_counts', 1),
    'schedule.max_iters': lambda c: c.train_cfg.max_iters,
    'schedule.max_epochs': lambda c: c.train_cfg.max_epochs,
    'schedule.warmup': _warmup,
    'schedule.warmup_start': lambda c: c.param_scheduler[0].start_factor,
    'schedule.warmup_start_lr': lambda c: c.param_scheduler[0].start_factor * c.optim_wrapper.optimizer.lr,
    'schedule.poly_power': lambda c: c.param_scheduler[-1].power,
    'schedule.min_lr': _min_lr,
    # data
    'data.mean': lambda c: list(_preprocessor(c).mean),
    'data.std': lambda c: list(_preprocessor(c).std),
    'data.reduce_zero_label': lambda c: _find(_train(c), 'LoadAnnotations').reduce_zero_label,
    'data.train_scale': lambda c: tuple(_find(_train(c), 'RandomResize').scale),
    'data.train_ratio_range': lambda c: tuple(_find(_train(c), 'RandomResize').ratio_range),
    'data.crop': lambda c: (tuple(_crop(c).crop_size) if _crop(c)
                            else (_rrc(c) or _two_view(c)).get('scale' if _rrc(c) else 'size')),
    'data.cat_max_ratio': lambda c: _crop(c).cat_max_ratio,
    'data.flip_prob': lambda c: (_find(_train(c), 'RandomFlip') or {}).get('prob', (_two_view(c) or _rrc(c) or {}).get(
        'flip_prob')),
    'data.photometric_distortion': _photometric_distortion,
    'data.color_jitter': lambda c: (None if _color_jitter(c) is None else tuple(
        _color_jitter(c)[k] for k in ('brightness', 'contrast', 'saturation'))),
    'data.rrc_scale': lambda c: tuple(_two_view(c).scale
                                      if _two_view(c)
                                      else _rrc(c).get('crop_ratio_range', (0.08, 1.0))),
    'data.interpolation': lambda c: (_rrc(c) or _two_view(c)).interpolation,
    'data.randaugment': _randaugment,
    'data.randaugment_fill': lambda c: list(_rand_augment(c).hparams.pad_val)[::-1],  # BGR -> RGB
    'data.reprob': lambda c: _random_erasing(c).erase_prob if _random_erasing(c) else 0.0,
    'data.remode_pixel_normal': _pixel_normal_erasing,
    'data.drop_last': lambda c: c.train_dataloader.get('drop_last', False),
    'data.sampler': lambda c: c.train_dataloader.sampler.type,
    'mim.second_size': lambda c: _two_view(c).tokenizer_size,
    'mim.second_interpolation': lambda c: _two_view(c).tokenizer_interpolation,
    'mim.num_masking_patches': lambda c: _find(_train(c), 'BEiTMaskGenerator').num_masking_patches,
    'mim.min_num_patches': lambda c: _find(_train(c), 'BEiTMaskGenerator').min_num_patches,
    'mim.max_num_patches': lambda c: _find(_train(c), 'BEiTMaskGenerator').max_num_patches,
    'mixup': lambda c: [a.alpha for a in c.model.train_cfg.augments if a.type == 'Mixup'][0],
    'cutmix': lambda c: [a.alpha for a in c.model.train_cfg.augments if a.type == 'CutMix'][0],
    'label_smoothing': lambda c: c.model.head.loss.label_smooth_val,
    # evaluation
    'eval.mode': lambda c: c.model.test_cfg.mode,
    'eval.crop': lambda c: tuple(c.model.test_cfg.crop_size),
    'eval.stride': lambda c: tuple(c.model.test_cfg.stride),
    'eval.metric': lambda c: 'mIoU' if 'mIoU' in c.val_evaluator.iou_metrics else c.val_evaluator.iou_metrics,
    'eval.test_scale': lambda c: tuple(_find(_test(c), 'Resize').scale),
    'eval.test_pad_size_divisor': lambda c: (_preprocessor(c).get('test_cfg') or {}).get('size_divisor'),
    'eval.resize_short': lambda c: _find(_test(c), 'ResizeEdge').scale,
    'eval.resize': lambda c: tuple(_find(_test(c), 'Resize').scale),
    'eval.center_crop': lambda c: _find(_test(c), 'CenterCrop').crop_size if _find(_test(c), 'CenterCrop') else None,
    'eval.interpolation': lambda c: (_find(_test(c), 'ResizeEdge') or _find(_test(c), 'Resize')).interpolation,
}


def _same(ours, published) -> bool:
    if isinstance(published, float) and isinstance(ours, (int, float)):
        return math.isclose(ours, published, rel_tol=1e-9, abs_tol=1e-15)
    if isinstance(published, (list, tuple)) and isinstance(ours, (list, tuple)) and len(ours) == len(published):
        return all(_same(a, b) for a, b in zip(ours, published))
    return type(ours) is type(published) and ours == published or (ours is None and published is None)


def test_every_published_value_has_a_reader():
    keys = {k for refs in RECIPES.values() for k in refs}
    assert keys <= set(READERS), sorted(keys - set(READERS))
    assert all(' ' in r.source or 'paper' in r.source for refs in RECIPES.values() for r in refs.values())


def differences(cfg: Config, refs: dict, readers: Dict[str, Callable[[Config], object]]) -> List[str]:
    """One line per published value of ``refs`` (name -> ``Ref``) that ``readers`` do not find in ``cfg``."""
    wrong = []
    for name, ref in refs.items():
        try:
            ours = readers[name](cfg)
        except (AttributeError, KeyError, TypeError, IndexError) as err:
            ours = f'<not in the config: {err!r}>'
        if not _same(ours, ref.value):
            wrong.append(f'{name}: config {ours!r}, published {ref.value!r} ({ref.source})')
    return wrong


@pytest.mark.parametrize('key', sorted(RECIPES), ids=str)
def test_config_has_the_published_values(key):
    """Each full-size config, built through MMEngine's Config (bases merged), has every value
    tests/configs/reference_recipes.py pins for it (published value, reference file and line); the failures list them
    all."""
    wrong = differences(Config.fromfile(os.path.join(ROOT, 'configs', key)), RECIPES[key], READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES[key])} values differ:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('key', sorted(k for k in RECIPES if 'train_pipeline_exact' in Config.fromfile(
    os.path.join(ROOT, 'configs', k))), ids=str)
def test_exact_pipeline_has_the_published_values(key):
    """A config that trains with a cheaper pipeline keeps the exact one a switch away (``train_pipeline_exact``):
    that one has the published values too."""
    cfg = Config.fromfile(os.path.join(ROOT, 'configs', key))
    cfg.train_dataloader.dataset.pipeline = cfg.train_pipeline_exact
    assert _find(cfg.train_pipeline_exact, 'LoadImageFromFile') is not None
    wrong = differences(cfg, RECIPES[key], READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES[key])} values differ:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('key', sorted(k for k in RECIPES if Config.fromfile(
    os.path.join(ROOT, 'configs', k)).get('train_pipeline_gpu_decode') is not None), ids=str)
def test_gpu_decode_pipeline_has_the_published_values(key):
    """The GPU-decode pipeline a MIM or fine-tuning config keeps a switch away (``train_pipeline_gpu_decode``) has
    the published values too."""
    cfg = Config.fromfile(os.path.join(ROOT, 'configs', key))
    cfg.train_dataloader.dataset.pipeline = cfg.train_pipeline_gpu_decode
    assert (_find(cfg.train_pipeline_gpu_decode, 'EncodedTwoViewRandomResizedCrop') is not None
            or _find(cfg.train_pipeline_gpu_decode, 'EncodedRandomResizedCrop') is not None)
    wrong = differences(cfg, RECIPES[key], READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES[key])} values differ:\n' + '\n'.join(wrong)


# ---- Weight decay and lr of every parameter vs unilm's optimizer code

def unilm_get_num_layer_for_vit(var_name: str, num_max_layer: int) -> int:
    """unilm beit/optim_factory.py get_num_layer_for_vit (bare-model names)."""
    if var_name in ('cls_token', 'mask_token', 'pos_embed'):
        return 0
    if var_name.startswith('patch_embed'):
        return 0
    if var_name.startswith('rel_pos_bias'):
        return num_max_layer - 1
    if var_name.startswith('blocks'):
        return int(var_name.split('.')[1]) + 1
    return num_max_layer - 1


def unilm_get_parameter_groups(named_params, weight_decay: float, skip_list=(),
                               get_num_layer: Optional[Callable] = None,
                               get_layer_scale: Optional[Callable] = None) -> Dict[str, Tuple[float, float]]:
    """unilm beit/optim_factory.py get_parameter_groups, returning name -> (lr_scale, weight_decay)."""
    result = {}
    for name, param in named_params:
        if not param.requires_grad:
            continue
        if len(param.shape) == 1 or name.endswith('.bias') or name in skip_list:
            this_weight_decay = 0.
        else:
            this_weight_decay = weight_decay
        layer_id = get_num_layer(name) if get_num_layer is not None else None
        scale = get_layer_scale(layer_id) if get_layer_scale is not None else 1.
        result[name] = (scale, this_weight_decay)
    return result


def unilm_seg_get_num_layer_for_vit(var_name: str, num_max_layer: int) -> int:
    """unilm mmcv_custom/layer_decay_optimizer_constructor.py get_num_layer_for_vit ('backbone.'-prefixed names)."""
    if var_name in ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed'):
        return 0
    if var_name.startswith('backbone.patch_embed'):
        return 0
    if var_name.startswith('backbone.blocks'):
        return int(var_name.split('.')[2]) + 1
    return num_max_layer - 1


def unilm_seg_add_params(named_params, base_wd: float, num_layers: int,
                         layer_decay_rate: float) -> Dict[str, Tuple[float, float]]:
    """unilm mmcv_custom/layer_decay_optimizer_constructor.py LayerDecayOptimizerConstructor.add_params, returning
    name -> (lr_scale, weight_decay); ``num_layers`` is paramwise_cfg['num_layers'] (the depth)."""
    num_layers = num_layers + 2
    result = {}
    for name, param in named_params:
        if not param.requires_grad:
            continue
        if len(param.shape) == 1 or name.endswith('.bias') or name in ('pos_embed', 'cls_token'):
            this_weight_decay = 0.
        else:
            this_weight_decay = base_wd
        layer_id = unilm_seg_get_num_layer_for_vit(name, num_layers)
        result[name] = (layer_decay_rate**(num_layers - layer_id - 1), this_weight_decay)
    return result


def _unilm_name(name: str) -> str:
    """A beit_mm classifier / MIM model name as unilm's bare model names it (BEiT keeps unilm's names; mean-pool norm
    ``neck.fc_norm`` -> ``fc_norm``, classifier ``head.fc`` -> ``head``, MIM head ``head.lm_head`` -> ``lm_head``)."""
    for ours, theirs in (('backbone.', ''), ('neck.', ''), ('head.fc.', 'head.'), ('head.', '')):
        if name.startswith(ours):
            return theirs + name[len(ours):]
    return name


def _ours(model: nn.Module, optim_cfg) -> Dict[str, Tuple[float, float]]:
    wrapper = build_optim_wrapper(model, copy.deepcopy(optim_cfg))
    base_lr = optim_cfg['optimizer']['lr']
    return {name: (group['lr'] / base_lr, group['weight_decay'])
            for group in wrapper.optimizer.param_groups for name in group['param_names']}


def _assert_same(ours: Dict[str, Tuple[float, float]], ref: Dict[str, Tuple[float, float]]) -> None:
    assert set(ours) == set(ref)
    wrong = {n: (ours[n], ref[n]) for n in ref
             if ours[n][1] != ref[n][1] or not math.isclose(ours[n][0], ref[n][0], rel_tol=1e-12)}
    assert not wrong, f'{len(wrong)} parameters differ from the reference (ours, unilm): {dict(list(wrong.items())[:8])}'


def _build(cfg: Config) -> nn.Module:
    init_default_scope(cfg.default_scope)
    from mmengine.registry import MODELS
    return MODELS.build(cfg.model)


def _strip_init(cfg: Config) -> None:
    cfg.model.backbone.pop('init_cfg', None)
    if 'target_generator' in cfg.model:
        cfg.model.target_generator.pop('init_cfg', None)


SEG_LAYER_DECAY = ['beit-base_upernet_8xb2-160k_ade20k-640x640.py', 'beit-base_upernet_8xb2-160k_ade20k-512x512.py',
                   'beit-base_beit-pre_upernet_8xb2-160k_ade20k-512x512.py',
                   'beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py']


@pytest.mark.parametrize('name', SEG_LAYER_DECAY, ids=str)
def test_segmentation_param_groups_match_unilm_constructor(name):
    """Every parameter of the segmentor (BEiT-B; BEiT-L at its 24-block depth with narrow widths) gets unilm's
    segmentation lr scale and weight decay: 1-D and biases exempt, tokens and relative position tables decayed."""
    cfg = Config.fromfile(_cfg_path(name))
    _strip_init(cfg)
    depth = 24 if 'large' in name else 12
    if 'large' in name:  # names and shapes' ndim as BEiT-L, widths shrunk to build quickly
        width = 64
        cfg.model.backbone.arch = dict(embed_dims=width, num_layers=depth, num_heads=2, mlp_ratio=4.0)
        cfg.model.neck.embed_dim = width
        cfg.model.decode_head.in_channels = [width] * 4
        cfg.model.auxiliary_head.in_channels = width
    cfg.model.decode_head.channels = 32
    cfg.model.auxiliary_head.channels = 32
    model = _build(cfg)
    published = RECIPES[_key(name)]
    ref = unilm_seg_add_params(model.named_parameters(), published['optimizer.weight_decay'].value, depth,
                               published['layer_decay'].value)
    _assert_same(_ours(model, cfg.optim_wrapper), ref)
    assert ref['backbone.cls_token'][1] > 0 and ref['backbone.blocks.0.attn.relative_position_bias_table'][1] > 0


def test_imagenet_finetuning_param_groups_match_unilm():
    """BEiT-B ImageNet fine-tuning: unilm run_class_finetuning's LayerDecayValueAssigner + get_parameter_groups with
    skip_list no_weight_decay() = {pos_embed, cls_token}, for every parameter."""
    cfg = Config.fromfile(_cfg_path('beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py'))
    _strip_init(cfg)
    model = _build(cfg)
    num_layers = len(model.backbone.blocks)
    published = RECIPES[_key('beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py')]
    decay = published['layer_decay'].value
    values = [decay**(num_layers + 1 - i) for i in range(num_layers + 2)]  # run_class_finetuning.py line 467
    named = [(_unilm_name(n), p) for n, p in model.named_parameters()]
    ref = unilm_get_parameter_groups(named, published['optimizer.weight_decay'].value, {'pos_embed', 'cls_token'},
                                     lambda n: unilm_get_num_layer_for_vit(n, len(values)), lambda i: values[i])
    ref = {name: ref[_unilm_name(name)] for name, _ in model.named_parameters()}
    _assert_same(_ours(model, cfg.optim_wrapper), ref)


@pytest.mark.parametrize('name', ['beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py', 'beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py'],
                         ids=str)
def test_pretraining_param_groups_match_unilm(name):
    """BEiT-B MIM pretraining: unilm run_beit_pretraining's create_optimizer (get_parameter_groups, skip_list
    no_weight_decay(), no layer decay) for every trainable parameter; mask_token and the shared table decay."""
    cfg = Config.fromfile(_cfg_path(name))
    _strip_init(cfg)
    model = _build(cfg)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    ref = unilm_get_parameter_groups([(_unilm_name(n), p) for n, p in trainable],
                                     RECIPES[_key(name)]['optimizer.weight_decay'].value, {'pos_embed', 'cls_token'})
    ref = {name: ref[_unilm_name(name)] for name, _ in trainable}
    _assert_same(_ours(model, cfg.optim_wrapper), ref)
    assert ref['backbone.mask_token'][1] > 0


# ---- Normalization: fine-tuning from a MIM checkpoint uses the pretraining config's mean/std

ALL_CONFIGS = sorted(os.path.join(d, f) for d in (os.path.join(ROOT, 'configs/beit'), os.path.join(ROOT, 'configs/cvt'))
                     for f in os.listdir(d) if f.endswith('.py'))


def _mim_pairs() -> List[Tuple[str, str]]:
    """(fine-tuning config, pretraining config) for every config whose text names a ``work_dirs/<stem>/`` checkpoint
    of a MIM config (one whose model has a ``target_generator``), in a ``mim_checkpoint`` variable or a comment."""
    import re
    stems = {os.path.splitext(os.path.basename(p))[0]: p for p in ALL_CONFIGS}
    pairs = []
    for path in ALL_CONFIGS:
        with open(path) as f:
            text = f.read()
        for stem in sorted(set(re.findall(r'work_dirs/([\w.-]+)/', text))):
            if stem in stems and stems[stem] != path and 'target_generator' in Config.fromfile(stems[stem]).model:
                pairs.append((path, stems[stem]))
    return pairs


MIM_PAIRS = _mim_pairs()


def test_mim_pairs_found():
    names = {(os.path.basename(a), os.path.basename(b)) for a, b in MIM_PAIRS}
    assert ('beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py', 'beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py') in names
    assert ('beit-base_beit-pre_upernet_8xb2-160k_ade20k-512x512.py',
            'beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py') in names
    assert ('cvt-13_upernet_8xb2-160k_ade20k-512x512.py', 'beit_cvt-13_8xb256-amp-coslr-300e_in1k.py') in names


@pytest.mark.parametrize('finetune,pretrain', MIM_PAIRS,
                         ids=[f'{os.path.basename(a)}<-{os.path.basename(b)}' for a, b in MIM_PAIRS])
def test_finetuning_normalizes_like_its_pretraining(finetune, pretrain):
    ft, pt = Config.fromfile(finetune).model.data_preprocessor, Config.fromfile(pretrain).model.data_preprocessor
    assert (list(ft.mean), list(ft.std)) == (list(pt.mean), list(pt.std))


def test_imagenet_pretraining_and_ade20k_use_imagenet_mean_std():
    """unilm beit/README.md: --imagenet_default_mean_and_std for ImageNet-1k pretraining; unilm/mmseg 0.x
    ade20k(_640x640).py img_norm_cfg: ImageNet mean/std for every ADE20K fine-tuning."""
    names = ['beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py', 'beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py',
             'beit_cvt-13_8xb256-amp-coslr-300e_in1k.py'] + SEG_LAYER_DECAY
    for name in names:
        pre = Config.fromfile(_cfg_path(name)).model.data_preprocessor
        np.testing.assert_allclose(pre.mean, IMAGENET_MEAN, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(pre.std, IMAGENET_STD, rtol=1e-6, err_msg=name)


# ---- Multi-scale TTA and relative position bias shrinking

def setr_resize_shape(h: int, w: int, scale: Tuple[int, int], crop: int) -> Tuple[int, int]:
    """unilm SETR_Resize._resize_img (setr_multi_scale, keep_ratio) then mmcv 1.x imrescale/rescale_size."""
    new_short = crop if min(scale) < crop else min(scale)
    new_h, new_w = (new_short * h / w, new_short) if h > w else (new_short, new_short * w / h)
    max_long, max_short = max(new_h, new_w), min(new_h, new_w)
    factor = min(max_long / max(h, w), max_short / min(h, w))
    return int(h * factor + 0.5), int(w * factor + 0.5)


@pytest.mark.parametrize('name', ['beit-base_upernet_8xb2-160k_ade20k-640x640.py',
                                  'beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py'], ids=str)
def test_tta_resizes_like_unilm_multiscale(name):
    """tools/test.py --tta: every view of an image has unilm's multi-scale size (short side >= 640)."""
    from mmengine.dataset import Compose
    cfg = Config.fromfile(_cfg_path(name))
    init_default_scope('mmseg')
    pipeline = slide_tta_pipeline(cfg)
    tta = next(t for t in pipeline if t['type'] == 'TestTimeAug')
    resizes = Compose(tta['transforms'][0]).transforms
    crop = cfg.model.test_cfg.crop_size[0]
    for h, w in ((512, 683), (683, 512), (256, 341), (300, 1400), (1024, 1024)):
        for resize, ratio in zip(resizes, [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]):
            out = resize(dict(img=np.zeros((h, w, 3), np.uint8), img_shape=(h, w), ori_shape=(h, w)))
            want = setr_resize_shape(h, w, (int(2560 * ratio), int(640 * ratio)), crop)
            assert out['img'].shape[:2] == want, (h, w, ratio)
            assert min(out['img'].shape[:2]) >= crop


def test_tta_feeds_only_full_windows_to_the_backbone(tmp_path):
    """A slide-inference TTA run (sizes shrunk: 32 px crops, test scale (128, 32), a tiny BEiT) feeds the backbone
    only crop-size windows, for images smaller and larger than the crop."""
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmengine.dataset import Compose
    cfg = Config.fromfile(_cfg_path('beit-base_upernet_8xb2-160k_ade20k-640x640.py'))
    crop = 32
    cfg.model.backbone.pop('init_cfg')
    cfg.model.backbone.update(arch=dict(embed_dims=32, num_layers=4, num_heads=2, mlp_ratio=2.0), img_size=crop,
                              out_indices=(0, 1, 2, 3), drop_path_rate=0.0)
    cfg.model.neck.embed_dim = 32
    cfg.model.decode_head.update(in_channels=[32] * 4, channels=16, norm_cfg=dict(type='BN'))
    cfg.model.auxiliary_head.update(in_channels=32, channels=16, norm_cfg=dict(type='BN'))
    cfg.model.neck.norm_cfg = dict(type='BN')
    cfg.model.data_preprocessor.size = (crop, crop)
    cfg.model.test_cfg.update(crop_size=(crop, crop), stride=(crop * 2 // 3, ) * 2)
    for t in cfg.test_pipeline:
        if t['type'] == 'Resize':
            t['scale'] = (4 * crop, crop)
    pipeline = slide_tta_pipeline(cfg)
    tta = next(t for t in pipeline if t['type'] == 'TestTimeAug')
    tta['transforms'] = [tta['transforms'][0], tta['transforms'][1], [dict(type='PackSegInputs')]]
    init_default_scope('mmseg')
    model = MODELS.build(dict(type='SegTTAModel', module=cfg.model)).eval()
    windows = []
    model.module.backbone.register_forward_pre_hook(lambda m, args: windows.append(tuple(args[0].shape[-2:])))
    transforms = Compose(tta['transforms'][0]).transforms
    failure = None  # a window smaller than the tiny model can take fails inside it; report the windows first
    for h, w in ((20, 27), (50, 40)):
        views = {'inputs': [], 'data_samples': []}
        for resize in transforms:
            for flip in tta['transforms'][1]:
                results = dict(img=np.random.randint(0, 255, (h, w, 3), np.uint8), img_shape=(h, w),
                               ori_shape=(h, w), img_path='x.png')
                for t in (resize, flip, tta['transforms'][2][0]):
                    results = Compose([t])(results)
                views['inputs'].append([results['inputs']])
                views['data_samples'].append([results['data_samples']])
        with torch.no_grad():
            try:
                model.test_step(views)  # one list (of a batch of 1) per augmented view, as the TTA dataloader gives
            except RuntimeError as err:
                failure = err
                break
    assert windows and set(windows) == {(crop, crop)}, (sorted(set(windows)), failure)
    assert failure is None, failure


def test_rel_pos_bias_shrink_equals_central_crop():
    """A table built for a 10x12 grid, used on a 6x9 grid: every token pair gets the bias of the same pair inside the
    10x12 grid (offsets are the same in pixels), and the shrunk table is the central block of offsets."""
    g = torch.Generator().manual_seed(0)
    big, small, heads = (10, 12), (6, 9), 3
    table = torch.randn((2 * big[0] - 1) * (2 * big[1] - 1) + 3, heads, generator=g)
    shrunk = resize_rel_pos_bias_table(table, big, small)
    ours = gather_relative_position_bias(shrunk, small)  # (heads, 1 + 54, 1 + 54)
    full = gather_relative_position_bias(table, big)  # (heads, 1 + 120, 1 + 120)
    rows, cols = torch.meshgrid(torch.arange(small[0]), torch.arange(small[1]), indexing='ij')
    keep = torch.cat([torch.zeros(1, dtype=torch.long), 1 + (rows * big[1] + cols).flatten()])  # cls + the sub-grid
    assert torch.equal(ours, full[:, keep][:, :, keep])
    grid = table[:-3].reshape(2 * big[0] - 1, 2 * big[1] - 1, heads)
    central = grid[big[0] - small[0]:big[0] + small[0] - 1, big[1] - small[1]:big[1] + small[1] - 1]
    assert torch.equal(shrunk[:-3], central.reshape(-1, heads)) and torch.equal(shrunk[-3:], table[-3:])


# ---- Batch-size warning

FULL_SIZE = sorted(os.path.basename(k) for k in RECIPES)


@pytest.mark.parametrize('name', FULL_SIZE, ids=str)
def test_full_size_configs_check_their_published_batch(name):
    """Each full-size config's recipe batch (``auto_scale_lr.base_batch_size``) is the published total batch: no warning
    at its 8 GPUs, a warning at 1."""
    cfg = Config.fromfile(_cfg_path(name))
    published = RECIPES[_key(name)]['total_batch'].value
    assert any(h['type'] == 'beit_mm.BatchSizeCheckHook' for h in cfg.get('custom_hooks', []))
    assert cfg.auto_scale_lr.base_batch_size == published
    accumulate = cfg.optim_wrapper.get('accumulative_counts', 1)
    assert batch_size_warning(8, cfg.train_dataloader.batch_size, accumulate, published, False) is None
    assert 'differs' in batch_size_warning(1, cfg.train_dataloader.batch_size, accumulate, published, False)


def test_batch_size_hook_warns_at_start(mm_warnings):
    cfg = Config(dict(train_dataloader=dict(batch_size=1), optim_wrapper=dict(accumulative_counts=2),
                      auto_scale_lr=dict(enable=False, base_batch_size=16)))
    BatchSizeCheckHook().before_train(types.SimpleNamespace(cfg=cfg))
    assert any('effective batch size 2 (1 processes x 1 per process x 2 accumulation steps) differs from the '
               "recipe's 16" in m for m in mm_warnings)
    mm_warnings.clear()
    cfg.auto_scale_lr.enable = True
    BatchSizeCheckHook().before_train(types.SimpleNamespace(cfg=cfg))
    assert any('ignores accumulation' in m for m in mm_warnings)
    mm_warnings.clear()
    cfg.optim_wrapper.accumulative_counts = 1
    BatchSizeCheckHook().before_train(types.SimpleNamespace(cfg=cfg))
    assert mm_warnings == []


# ---- Demos: seeded, deterministic, scored on a checkpoint not picked on the split they report

DEMO_CONFIGS = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'configs', 'demo', '*.py')))


@pytest.mark.parametrize('path', DEMO_CONFIGS, ids=str)
def test_demo_configs_are_seeded_deterministic_and_select_nothing(path):
    """Every demo config fixes the seed, asks for deterministic algorithms and saves no best-metric checkpoint, so
    nothing is picked on the split the demo scripts report."""
    cfg = Config.fromfile(os.path.join(ROOT, path))
    assert cfg.randomness.seed is not None and cfg.randomness.get('deterministic') is True, cfg.randomness
    checkpoint = cfg.get('default_hooks', {}).get('checkpoint', {})
    assert checkpoint.get('save_best') is None, checkpoint


def test_demo_scripts_score_the_last_checkpoint():
    for script in ('tools/run_demo.sh', 'tools/run_demo_cls.sh'):
        text = open(os.path.join(ROOT, script)).read()
        assert 'best_' not in text and 'ckpt="$work_dir/$(cat "$work_dir/last_checkpoint"' in text, script
