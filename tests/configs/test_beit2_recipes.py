"""The BEiT v2 and VQ-KD configs reproduce unilm's published BEiT v2 runs: every value of reference_recipes.py
``RECIPES_V2``, schedule, per-parameter lr and weight decay, and batch, checked against that table and the reference
code re-implemented from its source, never the config's own literals.

Reference code (read, not copied):
- unilm ``beit2/utils.py`` ``cosine_scheduler`` (lines 530-547), used by ``run_beitv2_pretraining.py``
  (lines 277-280) and ``run_class_finetuning.py`` (lines 537-540);
- unilm ``beit2/optim_factory.py`` ``get_parameter_groups`` (lines 58-105), ``get_num_layer_for_vit`` (lines 33-44),
  ``LayerDecayValueAssigner`` (lines 47-55); ``run_class_finetuning.py`` lines 500-508; ``run_beitv2_pretraining.py``
  line 272 and ``modeling_pretrain.py`` lines 97-99 (``no_weight_decay``);
- unilm ``beit2/semantic_segmentation/mmcv_custom/layer_decay_optimizer_constructor.py``
  ``LayerDecayOptimizerConstructor.add_params`` (lines 20-66) and its ``get_num_layer_for_vit`` (lines 6-15);
- mmcv 1.x ``LrUpdaterHook`` linear warmup and ``PolyLrUpdaterHook.get_lr``, as unilm's segmentation runs used."""
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

from ..conftest import ROOT
from .reference_recipes import MMSEG0, PUBLISHED_V2, RECIPES_V2, UNILM
from .test_recipes import READERS, _find, _train, differences
from .test_recipes import simulate as simulate_updates

CFG = os.path.join(ROOT, 'configs', 'beit2')
PRETRAIN = sorted(k for k in RECIPES_V2 if 'mim.num_masking_patches' in RECIPES_V2[k])
FINETUNE_IN1K = sorted(k for k in RECIPES_V2 if 'mixup' in RECIPES_V2[k])
SEGMENTATION = sorted(k for k in RECIPES_V2 if 'eval.mode' in RECIPES_V2[k])
VQKD_TRAINING = sorted(k for k in RECIPES_V2 if k.startswith('vqkd/'))
ITERS_PER_EPOCH = 7  # stands in for len(ImageNet) // batch; the reference is computed with the same value


def _mask_generator(c: Config):
    return _find(_train(c), 'BEiTMaskGenerator')


# tests/configs/test_recipes.py's readers plus the BEiT v2 / VQ-KD settings
V2_READERS = {
    **READERS,
    'model.arch': lambda c: c.model.backbone.arch,
    'model.cls_pretrain': lambda c: dict(c.model.backbone.cls_pretrain),
    'model.shared_rel_pos_bias': lambda c: c.model.backbone.use_shared_rel_pos_bias,
    'model.abs_pos_emb': lambda c: c.model.backbone.use_abs_pos_emb,
    'model.mean_pooling': lambda c: c.model.neck.type == 'beit_mm.MeanPoolNeck',
    'head.vocab_size': lambda c: c.model.head.vocab_size,
    'optimizer.eps': lambda c: c.optim_wrapper.optimizer.eps,
    'mim.min_aspect': lambda c: _mask_generator(c).min_aspect,
    'mim.exact_count': lambda c: _mask_generator(c).get('exact_count', False),
    'tokenizer.with_decoder': lambda c: c.model.target_generator.get('with_decoder', True),
    'eval.save_best': lambda c: c.default_hooks.checkpoint.get('save_best'),
    'vqkd.arch': lambda c: c.model.arch,
    'vqkd.decay': lambda c: c.model.decay,
    'vqkd.kmeans_init': lambda c: c.model.kmeans_init,
    'vqkd.autocast': lambda c: c.model.get('autocast_dtype') is not None,
}


def pub(key: str, name: str):
    """The published value of ``name`` for config ``key`` (tests/configs/reference_recipes.py RECIPES_V2)."""
    return RECIPES_V2[key][name].value


def load(key: str) -> Config:
    return Config.fromfile(os.path.join(ROOT, 'configs', key))


def test_every_beit2_and_vqkd_config_is_checked():
    names = sorted(f'beit2/{f}' for f in os.listdir(CFG) if f.endswith('.py'))
    names += sorted(f'vqkd/{f}' for f in os.listdir(os.path.join(ROOT, 'configs', 'vqkd')) if f.endswith('.py'))
    assert sorted(names) == sorted(RECIPES_V2)
    assert sorted(PRETRAIN + FINETUNE_IN1K + SEGMENTATION + VQKD_TRAINING) == sorted(RECIPES_V2)
    assert set(V2_READERS) >= {k for refs in RECIPES_V2.values() for k in refs}
    # repository@commit path:line (the pyramid neck's rescales: mmseg 0.x, which unilm's backbone builds the same)
    assert all(UNILM in r.source or MMSEG0 in r.source for refs in RECIPES_V2.values() for r in refs.values())


@pytest.mark.parametrize('key', sorted(RECIPES_V2), ids=str)
def test_config_has_the_published_values(key):
    """Each BEiT v2 / VQ-KD config, built through MMEngine's Config (bases merged), has every value
    tests/configs/reference_recipes.py RECIPES_V2 pins for it (unilm file and line); the failures list them all."""
    wrong = differences(load(key), RECIPES_V2[key], V2_READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES_V2[key])} values differ:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('key', sorted(k for k in RECIPES_V2 if 'train_pipeline_exact' in load(k)), ids=str)
def test_exact_pipeline_has_the_published_values(key):
    """The exact pipeline a config keeps a switch away (``train_pipeline_exact``) has the published values too."""
    cfg = load(key)
    cfg.train_dataloader.dataset.pipeline = cfg.train_pipeline_exact
    assert _find(cfg.train_pipeline_exact, 'LoadImageFromFile') is not None
    wrong = differences(cfg, RECIPES_V2[key], V2_READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES_V2[key])} values differ:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('key', sorted(k for k in RECIPES_V2 if load(k).get('train_pipeline_gpu_decode') is not None),
                         ids=str)
def test_gpu_decode_pipeline_has_the_published_values(key):
    """The GPU-decode pipeline a config keeps a switch away (``train_pipeline_gpu_decode``: MIM's two-view crop or
    fine-tuning's crop) has them too."""
    cfg = load(key)
    cfg.train_dataloader.dataset.pipeline = cfg.train_pipeline_gpu_decode
    assert (_find(cfg.train_pipeline_gpu_decode, 'EncodedTwoViewRandomResizedCrop') is not None
            or _find(cfg.train_pipeline_gpu_decode, 'EncodedRandomResizedCrop') is not None)
    wrong = differences(cfg, RECIPES_V2[key], V2_READERS)
    assert not wrong, f'{len(wrong)} of {len(RECIPES_V2[key])} values differ:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('key', PRETRAIN, ids=str)
def test_pretraining_tokenizes_in_fp32_as_measured(key):
    """beit_mm's choice, not unilm's (fp16 autocast, ``engine_for_pretraining.py`` lines 54-56): the VQ-KD tokenizer
    runs in fp32, as its bf16 ids agreed on 93.5% of tokens only (docs/studies/tokenizer-precision.md)."""
    cfg = load(key)
    assert cfg.model.target_generator.type == 'beit_mm.VQKD'
    assert cfg.model.target_generator.get('autocast_dtype') is None, 'see docs/studies/tokenizer-precision.md'


# ---- S: schedules
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
    """lr of every optimizer update of an MMEngine run of ``cfg`` (``tests/configs/test_recipes.py``'s ``simulate``: the
    config's optim wrapper and ``param_scheduler`` built as the Runner builds them, stepped after every iteration)."""
    init_default_scope(cfg.default_scope)
    return np.asarray(simulate_updates(cfg, iters, epoch_length))


@pytest.mark.parametrize('key', PRETRAIN + FINETUNE_IN1K + VQKD_TRAINING, ids=str)
def test_imagenet_schedule_matches_unilm_cosine_scheduler(key):
    """Per-update lr = unilm's cosine_scheduler (warmup from 0: ``start_warmup_value`` is never passed, also not by
    run_vqkd_training.py lines 268-271) for a stand-in epoch length."""
    cfg = load(key)
    epochs, lr = pub(key, 'schedule.max_epochs'), pub(key, 'optimizer.lr')
    assert cfg.optim_wrapper.get('accumulative_counts', 1) == pub(key, 'accumulate') == 1
    ours = simulate(cfg, epochs * ITERS_PER_EPOCH, ITERS_PER_EPOCH)
    ref = unilm_cosine_scheduler(lr, pub(key, 'schedule.min_lr'), epochs, ITERS_PER_EPOCH, pub(key, 'schedule.warmup'))
    assert len(ours) == len(ref)
    assert int(np.argmax(ours)) == int(np.argmax(ref)) == pub(key, 'schedule.warmup') * ITERS_PER_EPOCH - 1
    # unilm's first update has lr 0, here 1e-9 x lr (MMEngine's LinearLR needs start_factor > 0)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=2e-9 * lr)


@pytest.mark.parametrize('key', SEGMENTATION, ids=str)
def test_segmentation_schedule_matches_mmcv_poly(key):
    cfg = load(key)
    iters = pub(key, 'schedule.max_iters')
    ours = simulate(cfg, iters)
    ref = mmcv_poly_with_warmup(pub(key, 'optimizer.lr'), iters, pub(key, 'schedule.warmup'),
                                pub(key, 'schedule.warmup_start'), pub(key, 'schedule.poly_power'))
    assert len(ours) == len(ref) and int(np.argmax(ours)) == int(np.argmax(ref)) == pub(key, 'schedule.warmup')
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-14)


# ---- W: weight decay and lr of every parameter, optimizer settings
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


@pytest.mark.parametrize('key', PRETRAIN, ids=str)
def test_pretraining_param_groups(key):
    """Each trainable parameter's (lr scale, weight decay) from unilm's create_optimizer(args, model): skip list
    {pos_embed, cls_token}, no layer decay; the cls-pretraining blocks, mask token and shared table included."""
    cfg = copy.deepcopy(load(key))
    without_tokenizer_file(cfg)
    large = pub(key, 'model.arch') == 'large'
    if large:
        shrink_width(cfg)
        cfg.model.head.embed_dims = 64
    model = build(cfg)
    assert len(model.backbone.blocks) == (24 if large else 12)
    assert not hasattr(model.target_generator, 'decoder')  # tokenizing builds no decoder
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    ref = unilm_get_parameter_groups([(unilm_name(n), p) for n, p in trainable], pub(key, 'optimizer.weight_decay'),
                                     {'pos_embed', 'cls_token'})
    ref = {n: ref[unilm_name(n)] for n, _ in trainable}
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)
    assert ref['backbone.cls_pt_layers.1.attn.qkv.weight'][1] > 0 and ref['backbone.mask_token'][1] > 0


@pytest.mark.parametrize('key', FINETUNE_IN1K, ids=str)
def test_imagenet_finetuning_param_groups(key):
    """Every parameter's (lr scale, weight decay) from unilm run_class_finetuning's LayerDecayValueAssigner +
    get_parameter_groups (skip list {pos_embed, cls_token}); BEiT-L's 24 blocks at a narrow width."""
    cfg = cfg_without_checkpoint(load(key))
    large = pub(key, 'model.arch') == 'large'
    if large:
        shrink_width(cfg)
        cfg.model.neck.in_channels = cfg.model.head.in_channels = 64
    model = build(cfg)
    num_layers = len(model.backbone.blocks)
    assert num_layers == (24 if large else 12)
    decay = pub(key, 'layer_decay')
    values = [decay**(num_layers + 1 - i) for i in range(num_layers + 2)]
    named = [(unilm_name(n), p) for n, p in model.named_parameters()]
    ref = unilm_get_parameter_groups(named, pub(key, 'optimizer.weight_decay'), {'pos_embed', 'cls_token'},
                                     lambda n: unilm_get_num_layer_for_vit(n, len(values)), lambda i: values[i])
    ref = {n: ref[unilm_name(n)] for n, _ in model.named_parameters()}
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)


def cfg_without_checkpoint(cfg: Config) -> Config:
    cfg = copy.deepcopy(cfg)
    cfg.model.backbone.pop('init_cfg', None)
    return cfg


@pytest.mark.parametrize('key', SEGMENTATION, ids=str)
def test_segmentation_param_groups(key):
    """Every segmentor parameter's (lr scale, weight decay) from unilm's segmentation LayerDecayOptimizerConstructor
    (1-D and biases exempt; tokens and relative position tables decay)."""
    cfg = cfg_without_checkpoint(load(key))
    depth = pub(key, 'model.num_layers')
    if depth == 24:
        shrink_width(cfg)
        cfg.model.neck.embed_dim = 64
        cfg.model.decode_head.in_channels = [64] * 4
        cfg.model.auxiliary_head.in_channels = 64
    cfg.model.decode_head.channels = 32
    cfg.model.auxiliary_head.channels = 32
    model = build(cfg)
    assert len(model.backbone.blocks) == depth
    ref = unilm_seg_add_params(model.named_parameters(), pub(key, 'optimizer.weight_decay'), depth,
                               pub(key, 'layer_decay'))
    assert_same_groups(ours_groups(model, cfg.optim_wrapper), ref)


# ---- B: batch; the published metric
@pytest.mark.parametrize('key', sorted(RECIPES_V2), ids=str)
def test_batch_is_the_published_one(key):
    """GPUs x images per GPU in the config name = the published effective batch, which the BatchSizeCheckHook
    compares with the run's at start; the pretraining tokenizer view goes on as raw 0..255 RGB."""
    cfg = load(key)
    gpus, per_gpu = map(int, re.search(r'_(\d+)xb(\d+)', key).groups())
    assert per_gpu == cfg.train_dataloader.batch_size and cfg.optim_wrapper.get('accumulative_counts', 1) == 1
    assert gpus * per_gpu == pub(key, 'total_batch') == cfg.auto_scale_lr.base_batch_size
    if key.startswith('beit2/'):
        assert any(h['type'] == 'beit_mm.BatchSizeCheckHook' for h in cfg.get('custom_hooks', []))
    if key in PRETRAIN:
        assert cfg.model.data_preprocessor.to_rgb


@pytest.mark.parametrize('key', sorted(PUBLISHED_V2), ids=str)
def test_header_states_the_published_metric(key):
    value = PUBLISHED_V2[key].value
    with open(os.path.join(ROOT, 'configs', key)) as f:
        header = ''.join(line for line in f if line.startswith('#'))
    assert re.search(rf'Published: {re.escape(str(value))}', header), (key, value)
