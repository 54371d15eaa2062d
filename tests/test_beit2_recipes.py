"""The BEiT v2 configs (configs/beit2/) reproduce unilm's published BEiT v2 runs: schedule (S), weight decay and lr
of every parameter (W), normalization (N) and batch (B), plus each remaining recipe value, checked against the values
published in microsoft/unilm ``beit2/`` (each value below carries the file and line it was read from) and against the
reference optimizer/scheduler code re-implemented from its source, never against the config's own literals.

Reference code re-implemented here (read, not copied):
- unilm ``beit2/utils.py`` ``cosine_scheduler`` (lines 530-547): one lr per optimizer update, ``np.linspace(0, lr,
  W)`` warmup then a cosine to ``min_lr``; used by ``run_beitv2_pretraining.py`` (lines 277-280) and
  ``run_class_finetuning.py`` (lines 537-540);
- unilm ``beit2/optim_factory.py`` ``get_parameter_groups`` (lines 58-105: no weight decay when ``param.ndim <= 1``,
  for ``.bias`` and for ``skip_list``), ``get_num_layer_for_vit`` (lines 33-44), ``LayerDecayValueAssigner``
  (lines 47-55); ``run_class_finetuning.py`` lines 500-508 (values ``decay ** (L + 1 - i)``, skip list
  ``no_weight_decay() = {pos_embed, cls_token}``); ``run_beitv2_pretraining.py`` line 272 (``create_optimizer(args,
  model)``: the same skip list, no layer decay) and ``modeling_pretrain.py`` lines 97-99 (``no_weight_decay``);
- unilm ``beit2/semantic_segmentation/mmcv_custom/layer_decay_optimizer_constructor.py``
  ``LayerDecayOptimizerConstructor.add_params`` (lines 20-66) and its ``get_num_layer_for_vit`` (lines 6-15);
- mmcv 1.x ``LrUpdaterHook`` linear warmup (``k = (1 - i / W) * (1 - warmup_ratio)``, ``lr = regular * (1 - k)``)
  and ``PolyLrUpdaterHook.get_lr`` (``(base - min_lr) * (1 - i / max_iters) ** power + min_lr``), set before every
  iteration, which unilm's segmentation runs used (``IterBasedRunnerAmp``).
"""
import copy
import math
import os
import re

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from torch import nn

from .conftest import ROOT
from .test_recipes import simulate as simulate_updates

CFG = os.path.join(ROOT, 'configs', 'beit2')
PT = 'beit2/PRETRAINING.md'
FT = 'beit2/get_started_for_image_classification.md'
RUN_PT = 'beit2/run_beitv2_pretraining.py'
RUN_FT = 'beit2/run_class_finetuning.py'
SEG = 'beit2/semantic_segmentation/configs/beit/upernet/'
IMAGENET_MEAN = ([123.675, 116.28, 103.53], 'beit2/datasets.py:31 (timm IMAGENET_DEFAULT_MEAN x 255)')
IMAGENET_STD = ([58.395, 57.12, 57.375], 'beit2/datasets.py:32 (timm IMAGENET_DEFAULT_STD x 255)')

# ---------------------------------------------------------------------------------------------------------------
# The published values: (value, 'file:line' in microsoft/unilm)
# ---------------------------------------------------------------------------------------------------------------
PRETRAIN_BASE_1600 = dict(
    arch=('base', f'{PT}:18'), early_layers=(9, f'{PT}:20'), head_layers=(2, f'{PT}:21'),
    num_mask_patches=(75, f'{PT}:22'), second_input_size=(224, f'{PT}:23'),
    second_interpolation=('bicubic', f'{PT}:24'), min_crop_scale=(0.2, f'{PT}:25'),
    batch=(2048, f'{PT}:41'), lr=(1.5e-3, f'{PT}:29'), warmup_epochs=(10, f'{PT}:30'), clip_grad=(3.0, f'{PT}:31'),
    drop_path=(0.1, f'{PT}:32'), layer_scale=(0.1, f'{PT}:33'), mean=IMAGENET_MEAN, std=IMAGENET_STD,
    betas=((0.9, 0.999), f'{PT}:35'), eps=(1e-8, f'{PT}:36'), epochs=(1600, f'{PT}:37'),
    weight_decay=(0.05, f'{RUN_PT}:89'), min_lr=(1e-5, f'{RUN_PT}:99'), input_size=(224, f'{RUN_PT}:61'),
    train_interpolation=('bicubic', f'{RUN_PT}:111'), color_jitter=(0.4, 'beit2/datasets.py:36'),
    min_mask_patches_per_block=(16, f'{RUN_PT}:59'), max_mask_patches_per_block=(None, f'{RUN_PT}:58'),
    min_aspect=(0.3, 'beit2/masking_generator.py:32'), shared_rel_pos_bias=(True, f'{RUN_PT}:50'),
    abs_pos_emb=(False, f'{RUN_PT}:52'), vocab_size=(8192, f'{RUN_PT}:75'),
    # the tokenizer runs under the same autocast as the model's forward (lines 55 and 59)
    tokenizer_under_amp=(True, 'beit2/engine_for_pretraining.py:55'))
PRETRAIN = {
    'beitv2-base-p16_vqkd_8xb256-amp-coslr-1600e_in1k.py': PRETRAIN_BASE_1600,
    'beitv2-base-p16_vqkd_8xb256-amp-coslr-300e_in1k.py': dict(
        PRETRAIN_BASE_1600, epochs=(300, f'{PT}:44'), betas=((0.9, 0.98), f'{PT}:45'), drop_path=(0.0, f'{PT}:46')),
    'beitv2-large-p16_vqkd_8xb256-amp-coslr-1600e_in1k.py': dict(
        PRETRAIN_BASE_1600, arch=('large', f'{PT}:58'), early_layers=(21, f'{PT}:60'), head_layers=(2, f'{PT}:61'),
        batch=(2048, f'{PT}:81'), lr=(1.5e-3, f'{PT}:69'), warmup_epochs=(10, f'{PT}:70'),
        clip_grad=(3.0, f'{PT}:71'), drop_path=(0.1, f'{PT}:72'), layer_scale=(1e-5, f'{PT}:73'),
        betas=((0.9, 0.999), f'{PT}:75'), eps=(1e-8, f'{PT}:76'), epochs=(1600, f'{PT}:77')),
}
FINETUNE_IN1K = {
    'beitv2-base-p16_vqkd-pre_8xb128-coslr-100e_in1k.py': dict(
        top1=(85.5, f'{FT}:10'), gpus=(8, f'{FT}:22'), batch_per_gpu=(128, f'{FT}:32'), batch=(1024, f'{FT}:46'),
        weight_decay=(0.05, f'{FT}:30'), warmup_epochs=(20, f'{FT}:35'), mean=IMAGENET_MEAN, std=IMAGENET_STD,
        lr=(5e-4, f'{FT}:48'), epochs=(100, f'{FT}:49'), mixup=(0.8, f'{FT}:50'), cutmix=(1.0, f'{FT}:51'),
        layer_decay=(0.6, f'{FT}:52'), drop_path=(0.2, f'{FT}:53'), min_lr=(1e-6, f'{RUN_FT}:104'),
        smoothing=(0.1, f'{RUN_FT}:117'), reprob=(0.25, f'{RUN_FT}:126'), init_scale=(0.001, f'{RUN_FT}:155'),
        mean_pooling=(True, f'{RUN_FT}:157')),
}
_SEG_BASE = dict(
    lr=(5e-5, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:48'),
    weight_decay=(0.05, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:48'),
    betas=((0.9, 0.999), f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:48'),
    layer_decay=(0.75, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:50'),
    drop_path=(0.15, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:32'),
    out_indices=((3, 5, 7, 11), f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:34'),
    stride=((341, 341), f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:45'),
    warmup_iters=(1500, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:54'),
    warmup_ratio=(1e-6, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:55'),
    power=(1.0, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:56'),
    batch_per_gpu=(2, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:59'),
    gpus=(8, f'{SEG}upernet_beit_base_12_512_slide_160k_ade20k.py:58'),
    iters=(160000, 'beit2/semantic_segmentation/configs/_base_/schedules/schedule_160k.py:7'),
    crop=((512, 512), 'beit2/semantic_segmentation/configs/_base_/datasets/ade20k.py:6'),
    mean=(IMAGENET_MEAN[0], 'beit2/semantic_segmentation/configs/_base_/datasets/ade20k.py:5'),
    std=(IMAGENET_STD[0], 'beit2/semantic_segmentation/configs/_base_/datasets/ade20k.py:5'),
    miou=(53.1, 'beit2/README.md:78'))
_L = f'{SEG}upernet_beit_large_24_512_slide_160k_ade20k.py'
_SEG_LARGE = dict(
    _SEG_BASE, lr=(4e-5, f'{_L}:47'), weight_decay=(0.05, f'{_L}:47'), layer_decay=(0.9, f'{_L}:49'),
    drop_path=(0.2, f'{_L}:32'), out_indices=((7, 11, 15, 23), f'{_L}:33'), stride=((341, 341), f'{_L}:44'),
    warmup_iters=(1500, f'{_L}:53'), batch_per_gpu=(2, f'{_L}:58'), miou=(56.7, 'beit2/README.md:80'))
SEGMENTATION = {
    'beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py': _SEG_BASE,
    'beitv2-base_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py': dict(
        _SEG_BASE, layer_decay=(0.85, f'{SEG}upernet_beit_base_12_512_slide_160k_21ktoade20k.py:50'),
        miou=(53.5, 'beit2/README.md:79')),
    'beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py': _SEG_LARGE,
    'beitv2-large_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py': dict(
        _SEG_LARGE, lr=(3e-5, f'{SEG}upernet_beit_large_24_512_slide_160k_21ktoade20k.py:47'),
        miou=(57.5, 'beit2/README.md:81')),
}
ITERS_PER_EPOCH = 7  # stands in for len(ImageNet) // batch; the reference is computed with the same value


def v(entry):
    """The value of a (value, source) pair."""
    return entry[0]


def load(name: str) -> Config:
    return Config.fromfile(os.path.join(CFG, name))


def test_every_beit2_config_is_checked():
    names = sorted(f for f in os.listdir(CFG) if f.endswith('.py'))
    assert names == sorted([*PRETRAIN, *FINETUNE_IN1K, *SEGMENTATION])


# ---------------------------------------------------------------------------------------------------------------
# S: schedules
# ---------------------------------------------------------------------------------------------------------------
def unilm_cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs):
    """unilm beit2/utils.py cosine_scheduler (start_warmup_value=0, warmup_steps=-1)."""
    warmup_iters = warmup_epochs * niter_per_ep
    warmup = np.linspace(0, base_value, warmup_iters) if warmup_epochs > 0 else np.array([])
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    rest = np.array([final_value + 0.5 * (base_value - final_value) * (1 + math.cos(math.pi * i / len(iters)))
                     for i in iters])
    return np.concatenate((warmup, rest))


def mmcv_poly_with_warmup(base_lr, iters, warmup_iters, warmup_ratio, power):
    """mmcv 1.x PolyLrUpdaterHook (min_lr 0) with LrUpdaterHook's linear warmup, set before each iteration."""
    out = []
    for it in range(iters):
        regular = base_lr * (1 - it / iters)**power
        if it < warmup_iters:
            regular *= 1 - (1 - it / warmup_iters) * (1 - warmup_ratio)
        out.append(regular)
    return np.asarray(out)


def simulate(cfg: Config, iters: int, epoch_length=None) -> np.ndarray:
    """lr of every optimizer update of an MMEngine run of ``cfg`` (``tests/test_recipes.py``'s ``simulate``: the
    config's optim wrapper and ``param_scheduler`` built as the Runner builds them, stepped after every iteration)."""
    init_default_scope(cfg.default_scope)
    return np.asarray(simulate_updates(cfg, iters, epoch_length))


@pytest.mark.parametrize('name', sorted({**PRETRAIN, **FINETUNE_IN1K}), ids=str)
def test_imagenet_schedule_matches_unilm_cosine_scheduler(name):
    pub = {**PRETRAIN, **FINETUNE_IN1K}[name]
    cfg = load(name)
    assert cfg.optim_wrapper.get('accumulative_counts', 1) == 1
    assert cfg.train_cfg.max_epochs == v(pub['epochs'])
    epochs, lr = v(pub['epochs']), v(pub['lr'])
    ours = simulate(cfg, epochs * ITERS_PER_EPOCH, ITERS_PER_EPOCH)
    ref = unilm_cosine_scheduler(lr, v(pub['min_lr']), epochs, ITERS_PER_EPOCH, v(pub['warmup_epochs']))
    assert len(ours) == len(ref)
    assert int(np.argmax(ours)) == int(np.argmax(ref)) == v(pub['warmup_epochs']) * ITERS_PER_EPOCH - 1
    # unilm's first update has lr 0, here 1e-9 x lr (MMEngine's LinearLR needs start_factor > 0)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=2e-9 * lr)


@pytest.mark.parametrize('name', sorted(SEGMENTATION), ids=str)
def test_segmentation_schedule_matches_mmcv_poly(name):
    pub = SEGMENTATION[name]
    cfg = load(name)
    assert cfg.train_cfg.max_iters == v(pub['iters']) and cfg.optim_wrapper.get('accumulative_counts', 1) == 1
    ours = simulate(cfg, v(pub['iters']))
    ref = mmcv_poly_with_warmup(v(pub['lr']), v(pub['iters']), v(pub['warmup_iters']), v(pub['warmup_ratio']),
                                v(pub['power']))
    assert int(np.argmax(ours)) == int(np.argmax(ref)) == v(pub['warmup_iters'])
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-14)


# ---------------------------------------------------------------------------------------------------------------
# W: weight decay and lr of every parameter, optimizer settings
# ---------------------------------------------------------------------------------------------------------------
def unilm_get_num_layer_for_vit(var_name: str, num_max_layer: int) -> int:
    """unilm beit2/optim_factory.py get_num_layer_for_vit (bare-model names), lines 33-44."""
    if var_name in ('cls_token', 'mask_token', 'pos_embed') or var_name.startswith('patch_embed'):
        return 0
    if var_name.startswith('rel_pos_bias'):
        return num_max_layer - 1
    if var_name.startswith('blocks'):
        return int(var_name.split('.')[1]) + 1
    return num_max_layer - 1


def unilm_get_parameter_groups(named_params, weight_decay, skip_list=(), get_num_layer=None, get_layer_scale=None):
    """unilm beit2/optim_factory.py get_parameter_groups (lines 58-105) -> {name: (lr_scale, weight_decay)}."""
    out = {}
    for name, param in named_params:
        if not param.requires_grad:
            continue
        wd = 0. if (param.ndim <= 1 or name.endswith('.bias') or name in skip_list) else weight_decay
        layer_id = get_num_layer(name) if get_num_layer is not None else None
        out[name] = (get_layer_scale(layer_id) if get_layer_scale is not None else 1., wd)
    return out


def unilm_seg_add_params(named_params, base_wd, num_layers, layer_decay_rate):
    """unilm beit2/semantic_segmentation/mmcv_custom/layer_decay_optimizer_constructor.py add_params (lines 20-66)
    with its get_num_layer_for_vit (lines 6-15), 'backbone.'-prefixed names -> {name: (lr_scale, weight_decay)}."""
    num_layers = num_layers + 2
    out = {}
    for name, param in named_params:
        if not param.requires_grad:
            continue
        wd = 0. if (len(param.shape) == 1 or name.endswith('.bias') or name in ('pos_embed', 'cls_token')) else base_wd
        if name in ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed') or name.startswith(
                'backbone.patch_embed'):
            layer_id = 0
        elif name.startswith('backbone.blocks'):
            layer_id = int(name.split('.')[2]) + 1
        else:
            layer_id = num_layers - 1
        out[name] = (layer_decay_rate**(num_layers - layer_id - 1), wd)
    return out


def unilm_name(name: str) -> str:
    """beit_mm model name -> unilm's bare model name (BEiT keeps unilm's names; ``neck.fc_norm`` -> ``fc_norm``,
    ``head.fc`` -> ``head``, ``head.lm_head`` -> ``lm_head``)."""
    for ours, theirs in (('backbone.', ''), ('neck.', ''), ('head.fc.', 'head.'), ('head.', '')):
        if name.startswith(ours):
            return theirs + name[len(ours):]
    return name


def ours_groups(model: nn.Module, optim_cfg) -> dict:
    wrapper = build_optim_wrapper(model, copy.deepcopy(optim_cfg))
    base_lr = optim_cfg['optimizer']['lr']
    return {n: (g['lr'] / base_lr, g['weight_decay']) for g in wrapper.optimizer.param_groups for n in g['param_names']}


def assert_same_groups(ours: dict, ref: dict) -> None:
    assert set(ours) == set(ref)
    wrong = {n: (ours[n], ref[n]) for n in ref
             if ours[n][1] != ref[n][1] or not math.isclose(ours[n][0], ref[n][0], rel_tol=1e-12)}
    assert not wrong, f'{len(wrong)} parameters differ (ours, unilm): {dict(list(wrong.items())[:8])}'


def without_tokenizer_file(cfg: Config) -> None:
    """The config's own ``beit_mm.VQKD`` (default arch: 8192 codes, ids on the 14x14 grid of the 224 view), built with
    random weights instead of the converted file it names (the tokenizer is frozen: it adds no parameter group)."""
    assert cfg.model.target_generator.type == 'beit_mm.VQKD', cfg.model.target_generator
    cfg.model.target_generator.init_cfg = None


def build(cfg: Config) -> nn.Module:
    init_default_scope(cfg.default_scope)
    from mmengine.registry import MODELS
    return MODELS.build(cfg.model)


def shrink_width(cfg: Config, width: int = 64) -> None:
    """BEiT-L's 24 blocks with narrow widths (names and ndims as BEiT-L, quick to build)."""
    cfg.model.backbone.arch = dict(embed_dims=width, num_layers=24, num_heads=2, mlp_ratio=4.0)


@pytest.mark.parametrize('name', sorted(PRETRAIN), ids=str)
def test_pretraining_recipe_and_param_groups(name):
    """Every pretraining value as published, and each trainable parameter's (lr scale, weight decay) from unilm's
    create_optimizer(args, model): get_parameter_groups with skip_list no_weight_decay() = {pos_embed, cls_token},
    no layer decay; the cls-pretraining blocks, mask token and shared table included."""
    pub = PRETRAIN[name]
    cfg = load(name)
    bb, opt = cfg.model.backbone, cfg.optim_wrapper
    assert bb.arch == v(pub['arch']) and bb.img_size == v(pub['input_size'])
    assert bb.cls_pretrain == dict(early_layers=v(pub['early_layers']), head_layers=v(pub['head_layers']))
    assert (bb.drop_path_rate, bb.layer_scale_init_value) == (v(pub['drop_path']), v(pub['layer_scale']))
    assert (bb.use_shared_rel_pos_bias, bb.use_abs_pos_emb, bb.use_rel_pos_bias) == (
        v(pub['shared_rel_pos_bias']), v(pub['abs_pos_emb']), False)
    assert cfg.model.head.vocab_size == v(pub['vocab_size'])
    tokenizer_dtype = cfg.model.target_generator.get('autocast_dtype')
    assert (tokenizer_dtype is not None and tokenizer_dtype == opt.dtype) == v(pub['tokenizer_under_amp'])
    assert (opt.optimizer.type, opt.optimizer.lr, tuple(opt.optimizer.betas), opt.optimizer.eps) == (
        'AdamW', v(pub['lr']), v(pub['betas']), v(pub['eps']))
    assert opt.optimizer.weight_decay == v(pub['weight_decay']) and opt.clip_grad.max_norm == v(pub['clip_grad'])
    assert opt.paramwise_cfg.layer_decay_rate == 1.0
    crop, mask = (t for t in cfg.train_dataloader.dataset.pipeline
                  if t.type in ('beit_mm.TwoViewRandomResizedCrop', 'beit_mm.BEiTMaskGenerator'))
    jitter = next(t for t in cfg.train_dataloader.dataset.pipeline if t.type == 'ColorJitter')
    assert (jitter.brightness, jitter.contrast, jitter.saturation) == (v(pub['color_jitter']), ) * 3
    assert (crop.size, crop.tokenizer_size, crop.scale) == (v(pub['input_size']), v(pub['second_input_size']),
                                                            (v(pub['min_crop_scale']), 1.0))
    assert (crop.interpolation, crop.tokenizer_interpolation) == (v(pub['train_interpolation']),
                                                                  v(pub['second_interpolation']))
    assert (mask.input_size, mask.num_masking_patches) == (v(pub['input_size']) // 16, v(pub['num_mask_patches']))
    assert (mask.min_num_patches, mask.max_num_patches, mask.min_aspect) == (
        v(pub['min_mask_patches_per_block']), v(pub['max_mask_patches_per_block']), v(pub['min_aspect']))
    # W: every parameter
    cfg = copy.deepcopy(cfg)
    without_tokenizer_file(cfg)
    if v(pub['arch']) == 'large':
        shrink_width(cfg)
        cfg.model.head.embed_dims = 64
    model = build(cfg)
    assert len(model.backbone.blocks) == (24 if v(pub['arch']) == 'large' else 12)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    ref = unilm_get_parameter_groups([(unilm_name(n), p) for n, p in trainable], v(pub['weight_decay']),
                                     {'pos_embed', 'cls_token'})
    ref = {n: ref[unilm_name(n)] for n, _ in trainable}
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)
    assert ref['backbone.cls_pt_layers.1.attn.qkv.weight'][1] > 0 and ref['backbone.mask_token'][1] > 0


@pytest.mark.parametrize('name', sorted(FINETUNE_IN1K), ids=str)
def test_imagenet_finetuning_recipe_and_param_groups(name):
    """Values as published, and every parameter's (lr scale, weight decay) from unilm run_class_finetuning's
    LayerDecayValueAssigner + get_parameter_groups (skip list {pos_embed, cls_token})."""
    pub = FINETUNE_IN1K[name]
    cfg = load(name)
    opt = cfg.optim_wrapper
    assert (opt.optimizer.lr, opt.optimizer.weight_decay) == (v(pub['lr']), v(pub['weight_decay']))
    assert opt.paramwise_cfg.layer_decay_rate == v(pub['layer_decay'])
    assert cfg.model.backbone.drop_path_rate == v(pub['drop_path'])
    assert [a.alpha for a in cfg.model.train_cfg.augments] == [v(pub['mixup']), v(pub['cutmix'])]
    assert cfg.model.head.loss.label_smooth_val == v(pub['smoothing'])
    assert math.isclose(cfg.model.head.init_cfg.std, 0.02 * v(pub['init_scale']), rel_tol=1e-12)
    assert (cfg.model.neck.type == 'beit_mm.MeanPoolNeck') == v(pub['mean_pooling'])
    erasing = next(t for t in cfg.train_dataloader.dataset.pipeline if t.type == 'RandomErasing')
    assert erasing.erase_prob == v(pub['reprob'])
    # 'pixel' mode fills with N(0, 1) in the normalized space: mean colour +- std (BGR order in the pipeline)
    np.testing.assert_allclose(erasing.fill_color, v(pub['mean'])[::-1])
    np.testing.assert_allclose(erasing.fill_std, v(pub['std'])[::-1])
    model = build(cfg_without_checkpoint(cfg))
    num_layers = len(model.backbone.blocks)
    values = [v(pub['layer_decay'])**(num_layers + 1 - i) for i in range(num_layers + 2)]
    named = [(unilm_name(n), p) for n, p in model.named_parameters()]
    ref = unilm_get_parameter_groups(named, v(pub['weight_decay']), {'pos_embed', 'cls_token'},
                                     lambda n: unilm_get_num_layer_for_vit(n, len(values)), lambda i: values[i])
    ref = {n: ref[unilm_name(n)] for n, _ in model.named_parameters()}
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)


def cfg_without_checkpoint(cfg: Config) -> Config:
    cfg = copy.deepcopy(cfg)
    cfg.model.backbone.pop('init_cfg', None)
    return cfg


@pytest.mark.parametrize('name', sorted(SEGMENTATION), ids=str)
def test_segmentation_recipe_and_param_groups(name):
    """Values as published, and every segmentor parameter's (lr scale, weight decay) from unilm's segmentation
    LayerDecayOptimizerConstructor (1-D and biases exempt; tokens and relative position tables decay)."""
    pub = SEGMENTATION[name]
    cfg = load(name)
    bb, opt = cfg.model.backbone, cfg.optim_wrapper
    assert (opt.optimizer.type, opt.optimizer.lr, tuple(opt.optimizer.betas), opt.optimizer.weight_decay) == (
        'AdamW', v(pub['lr']), v(pub['betas']), v(pub['weight_decay']))
    assert opt.paramwise_cfg.layer_decay_rate == v(pub['layer_decay'])
    assert (bb.drop_path_rate, tuple(bb.out_indices), bb.img_size) == (v(pub['drop_path']), v(pub['out_indices']),
                                                                       v(pub['crop'])[0])
    assert tuple(cfg.model.test_cfg.crop_size) == v(pub['crop']) and tuple(cfg.model.test_cfg.stride) == v(pub['stride'])
    assert tuple(cfg.crop_size) == v(pub['crop'])
    large = 'large' in name
    depth = 24 if large else 12
    cfg = cfg_without_checkpoint(cfg)
    if large:
        shrink_width(cfg)
        cfg.model.neck.embed_dim = 64
        cfg.model.decode_head.in_channels = [64] * 4
        cfg.model.auxiliary_head.in_channels = 64
    cfg.model.decode_head.channels = 32
    cfg.model.auxiliary_head.channels = 32
    model = build(cfg)
    assert len(model.backbone.blocks) == depth
    ref = unilm_seg_add_params(model.named_parameters(), v(pub['weight_decay']), depth, v(pub['layer_decay']))
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)


# ---------------------------------------------------------------------------------------------------------------
# N: normalization;  B: batch
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted({**PRETRAIN, **FINETUNE_IN1K, **SEGMENTATION}), ids=str)
def test_normalization_is_imagenet_mean_std(name):
    """--imagenet_default_mean_and_std (PRETRAINING.md:34, get_started:41) and ade20k.py img_norm_cfg; the VQ-KD
    tokenizer view goes on as 0..255 RGB (datasets.py:51-52 only ToTensor()s it; the tokenizer rescales)."""
    pub = {**PRETRAIN, **FINETUNE_IN1K, **SEGMENTATION}[name]
    pre = load(name).model.data_preprocessor
    np.testing.assert_allclose(pre.mean, v(pub['mean']), rtol=1e-6)
    np.testing.assert_allclose(pre.std, v(pub['std']), rtol=1e-6)
    if name in PRETRAIN:
        assert pre.target_pixels == 'raw' and pre.to_rgb


@pytest.mark.parametrize('name', sorted({**PRETRAIN, **FINETUNE_IN1K, **SEGMENTATION}), ids=str)
def test_batch_is_the_published_one(name):
    """GPUs x images per GPU in the config name = the published effective batch, which the BatchSizeCheckHook
    compares with the run's at start."""
    pub = {**PRETRAIN, **FINETUNE_IN1K, **SEGMENTATION}[name]
    cfg = load(name)
    gpus, per_gpu = map(int, re.search(r'_(\d+)xb(\d+)', name).groups())
    published = v(pub['batch']) if 'batch' in pub else v(pub['gpus']) * v(pub['batch_per_gpu'])
    assert per_gpu == cfg.train_dataloader.batch_size and cfg.optim_wrapper.get('accumulative_counts', 1) == 1
    assert gpus * per_gpu == published == cfg.auto_scale_lr.base_batch_size
    if 'batch_per_gpu' in pub:  # unilm's own layout: 8 GPUs x 128 / 8 GPUs x 2
        assert (gpus, per_gpu) == (v(pub['gpus']), v(pub['batch_per_gpu']))
    assert any(h['type'] == 'beit_mm.BatchSizeCheckHook' for h in cfg.get('custom_hooks', []))


@pytest.mark.parametrize('name', sorted({**FINETUNE_IN1K, **SEGMENTATION}), ids=str)
def test_header_states_the_published_metric(name):
    pub = {**FINETUNE_IN1K, **SEGMENTATION}[name]
    value = v(pub.get('top1') or pub['miou'])
    with open(os.path.join(CFG, name)) as f:
        header = ''.join(line for line in f if line.startswith('#'))
    assert re.search(rf'Published: {re.escape(str(value))}', header), (name, value)
