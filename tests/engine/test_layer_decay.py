"""Tests of beit_mm.LayerDecayOptimWrapperConstructor.

Reference: hand-written tables of the exact lr and weight decay of every parameter, following the layer-decay rule of
MAE's ``util/lr_decay.py`` / mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` (lr = base_lr * decay **
(num_layers - 1 - layer_id)) with decay 0.5, base lr 1.0 and weight decay 0.05 so every expected value is an exact
binary fraction: compared with ``==`` (tolerance 0). The mmpretrain/mmseg tests build real toolkit models.
"""
import logging
from typing import Dict, Tuple

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.optim import LinearLR, PolyLR, build_optim_wrapper
from torch import nn

import beit_mm  # noqa: F401  (registers beit_mm.LayerDecayOptimWrapperConstructor)
from beit_mm.engine.optimizers.layer_decay import LayerDecayOptimWrapperConstructor

BASE_LR = 1.0
WD = 0.05
DECAY = 0.5


class ToyAttention(nn.Module):

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.relative_position_bias_table = nn.Parameter(torch.zeros(7, 2))
        self.proj = nn.Linear(dim, dim)


class ToyBlock(nn.Module):

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ToyAttention(dim)
        self.gamma_1 = nn.Parameter(torch.ones(dim))
        self.fc = nn.Linear(dim, dim)


class ToyViT(nn.Module):
    """A 2-block ViT-like backbone answering get_layer_depth like mmpretrain's VisionTransformer."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 5, dim))
        self.patch_embed = nn.Conv2d(3, dim, 2, 2)
        self.blocks = nn.ModuleList([ToyBlock(dim), ToyBlock(dim)])
        self.norm = nn.LayerNorm(dim)
        self.my_cls_token_proj = nn.Linear(dim, dim, bias=False)  # not 'cls_token': must get weight decay
        self.frozen = nn.Parameter(torch.zeros(3), requires_grad=False)

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        num_layers = len(self.blocks) + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        parts = param_name[len(prefix):].split('.')
        if parts[0] in ('cls_token', 'pos_embed', 'patch_embed'):
            return 0, num_layers
        if parts[0] == 'blocks':
            return int(parts[1]) + 1, num_layers
        return num_layers - 1, num_layers


class ToySegmentor(nn.Module):
    """mmseg EncoderDecoder-like: no get_layer_depth itself; backbone + decode_head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = ToyViT()
        self.decode_head = nn.Sequential(nn.Conv2d(8, 4, 1), nn.BatchNorm2d(4), nn.Conv2d(4, 3, 1))


def _block_expected(prefix: str, lr: float, norm_wd: float, bias_wd: float) -> Dict[str, Tuple[float, float]]:
    return {
        f'{prefix}.norm1.weight': (lr, norm_wd),
        f'{prefix}.norm1.bias': (lr, norm_wd),
        f'{prefix}.attn.qkv.weight': (lr, WD),
        f'{prefix}.attn.q_bias': (lr, 0.0),
        f'{prefix}.attn.v_bias': (lr, 0.0),
        f'{prefix}.attn.relative_position_bias_table': (lr, 0.0),
        f'{prefix}.attn.proj.weight': (lr, WD),
        f'{prefix}.attn.proj.bias': (lr, bias_wd),
        f'{prefix}.gamma_1': (lr, 0.0),
        f'{prefix}.fc.weight': (lr, WD),
        f'{prefix}.fc.bias': (lr, bias_wd),
    }


def _segmentor_expected(norm_wd: float, bias_wd: float) -> Dict[str, Tuple[float, float]]:
    # num_layers = 2 blocks + 2 = 4; scale = 0.5 ** (3 - layer_id): id0 0.125, id1 0.25, id2 0.5, id3 1.
    expected = {
        'backbone.cls_token': (0.125, 0.0),
        'backbone.pos_embed': (0.125, 0.0),
        'backbone.patch_embed.weight': (0.125, WD),
        'backbone.patch_embed.bias': (0.125, bias_wd),
        'backbone.norm.weight': (1.0, norm_wd),
        'backbone.norm.bias': (1.0, norm_wd),
        'backbone.my_cls_token_proj.weight': (1.0, WD),
        'decode_head.0.weight': (1.0, WD),
        'decode_head.0.bias': (1.0, bias_wd),
        'decode_head.1.weight': (1.0, norm_wd),
        'decode_head.1.bias': (1.0, norm_wd),
        'decode_head.2.weight': (1.0, WD),
        'decode_head.2.bias': (1.0, bias_wd),
    }
    expected.update(_block_expected('backbone.blocks.0', 0.25, norm_wd, bias_wd))
    expected.update(_block_expected('backbone.blocks.1', 0.5, norm_wd, bias_wd))
    return expected


def _optim_cfg(**paramwise) -> dict:
    paramwise.setdefault('layer_decay_rate', DECAY)
    return dict(
        type='OptimWrapper',
        optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD),
        constructor='beit_mm.LayerDecayOptimWrapperConstructor',
        paramwise_cfg=paramwise)


def _per_param(optimizer: torch.optim.Optimizer, model: nn.Module) -> Dict[str, Tuple[float, float]]:
    """name -> (lr, weight_decay), checking that param_names name the very tensors of each group."""
    named = dict(model.named_parameters())
    result = {}
    for group in optimizer.param_groups:
        assert len(group['param_names']) == len(group['params'])
        for name, param in zip(group['param_names'], group['params']):
            assert named[name] is param, name
            assert name not in result, f'{name} in two groups'
            result[name] = (group['lr'], group['weight_decay'])
    return result


@pytest.mark.parametrize('norm_mult,bias_mult', [(0.0, 0.0), (0.25, 0.5)])
def test_segmentor_like_exact_lr_and_wd(norm_mult: float, bias_mult: float) -> None:
    """Every parameter of a backbone+decode_head model gets exactly the hand-computed lr and weight decay."""
    model = ToySegmentor()
    wrapper = build_optim_wrapper(model, _optim_cfg(bias_decay_mult=bias_mult, norm_decay_mult=norm_mult))
    got = _per_param(wrapper.optimizer, model)
    assert got == _segmentor_expected(norm_wd=WD * norm_mult, bias_wd=WD * bias_mult)
    assert 'backbone.frozen' not in got
    groups = wrapper.optimizer.param_groups
    # one group per (layer id, weight decay value); with mults 0 that is decay/no_decay per layer
    keys = [(g['layer_id'], g['weight_decay']) for g in groups]
    assert len(keys) == len(set(keys))
    # mults 0: 2 groups per layer; else layers 1-2 have {wd, 0, norm, bias}, layer 0 no norm, layer 3 no listed name
    assert len(groups) == (8 if norm_mult == 0 else 3 + 4 + 4 + 3)
    assert [g['layer_id'] for g in groups] == sorted(g['layer_id'] for g in groups)


class ToyClassifier(nn.Module):
    """mmpretrain-classifier-like: the top model answers get_layer_depth(full_name) itself; no `backbone`."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3)
        self.stages = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)])
        self.head = nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 10))

    def get_layer_depth(self, param_name: str) -> Tuple[int, int]:
        num_layers = len(self.stages) + 2
        parts = param_name.split('.')
        if parts[0] == 'stem':
            return 0, num_layers
        if parts[0] == 'stages':
            return int(parts[1]) + 1, num_layers
        return num_layers - 1, num_layers


def test_classifier_like_exact_lr_and_wd() -> None:
    """A model with its own get_layer_depth(name): ids come from it; scale = 0.5 ** (4 - id)."""
    model = ToyClassifier()
    wrapper = build_optim_wrapper(model, _optim_cfg(bias_decay_mult=0.0, norm_decay_mult=0.0))
    expected = {
        'stem.weight': (0.0625, WD),
        'stem.bias': (0.0625, 0.0),
        'stages.0.weight': (0.125, WD),
        'stages.0.bias': (0.125, 0.0),
        'stages.1.weight': (0.25, WD),
        'stages.1.bias': (0.25, 0.0),
        'stages.2.weight': (0.5, WD),
        'stages.2.bias': (0.5, 0.0),
        'head.0.weight': (1.0, 0.0),
        'head.0.bias': (1.0, 0.0),
        'head.1.weight': (1.0, WD),
        'head.1.bias': (1.0, 0.0),
    }
    assert _per_param(wrapper.optimizer, model) == expected
    assert len(wrapper.optimizer.param_groups) == 10


def test_default_no_decay_names_and_component_match() -> None:
    """Defaults: bias/norm mult 0 and the BEiT no-decay names; a custom list replaces them, matched per component."""
    constructor = LayerDecayOptimWrapperConstructor(
        dict(optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD)), dict(layer_decay_rate=DECAY))
    model = ToySegmentor()
    got = _per_param(constructor(model).optimizer, model)
    assert got == _segmentor_expected(norm_wd=0.0, bias_wd=0.0)

    model = ToySegmentor()
    wrapper = build_optim_wrapper(model, _optim_cfg(no_decay_names=('cls_token', 'q_bias')))
    got = _per_param(wrapper.optimizer, model)
    assert got['backbone.cls_token'] == (0.125, 0.0)
    assert got['backbone.blocks.1.attn.q_bias'] == (0.5, 0.0)
    assert got['backbone.my_cls_token_proj.weight'] == (1.0, WD)  # substring of a component: no match
    assert got['backbone.pos_embed'] == (0.125, WD)  # not listed any more
    assert got['backbone.blocks.0.gamma_1'] == (0.25, WD)  # 1-D but not bias/norm/listed: decays


def test_unilm_rule_exempts_1d_and_biases_only() -> None:
    """weight_decay_rule='unilm': unilm optim_factory.get_parameter_groups line 65 (1-D, ``.bias``, skip list): the 2-D
    relative position table decays, 1-D q/v biases, gammas and norms do not; tokens follow no_decay_names."""
    model = ToySegmentor()
    got = _per_param(build_optim_wrapper(model, _optim_cfg(weight_decay_rule='unilm')).optimizer, model)
    expected = _segmentor_expected(norm_wd=0.0, bias_wd=0.0)
    for prefix in ('backbone.blocks.0', 'backbone.blocks.1'):
        lr = expected[f'{prefix}.attn.qkv.weight'][0]
        expected[f'{prefix}.attn.relative_position_bias_table'] = (lr, WD)  # 2-D: decays under unilm's rule
    assert got == expected  # cls_token/pos_embed exempt by the default names ('cls_token', 'pos_embed')

    model = ToySegmentor()  # the segmentation constructor's names never match: tokens decay too
    got = _per_param(build_optim_wrapper(model, _optim_cfg(weight_decay_rule='unilm', no_decay_names=())).optimizer,
                     model)
    assert got['backbone.cls_token'] == (0.125, WD) and got['backbone.pos_embed'] == (0.125, WD)
    assert got['backbone.blocks.1.gamma_1'] == (0.5, 0.0) and got['decode_head.1.weight'] == (1.0, 0.0)

    with pytest.raises(ValueError, match=r"weight_decay_rule='unilm' .* takes no \['bias_decay_mult'\]"):
        build_optim_wrapper(ToySegmentor(), _optim_cfg(weight_decay_rule='unilm', bias_decay_mult=0.0))
    with pytest.raises(ValueError, match=r"weight_decay_rule must be one of \['names', 'unilm'\]"):
        build_optim_wrapper(ToySegmentor(), _optim_cfg(weight_decay_rule='timm'))


def test_schedulers_keep_per_group_ratios() -> None:
    """mmengine LinearLR (multiplicative) and PolyLR (eta_min=0) scale every group's lr by the same factor."""
    model = ToySegmentor()
    wrapper = build_optim_wrapper(model, _optim_cfg())
    initial = [g['lr'] for g in wrapper.optimizer.param_groups]
    scheduler = LinearLR(wrapper, start_factor=0.5, by_epoch=False, begin=0, end=4)
    for _ in range(2):
        wrapper.step()
        scheduler.step()
    factors = [g['lr'] / lr0 for g, lr0 in zip(wrapper.optimizer.param_groups, initial)]
    assert factors[0] == pytest.approx(0.5 + 2 * 0.5 / 3, rel=1e-12)  # mmengine: T = end - begin - 1 = 3
    assert all(f == pytest.approx(factors[0], rel=1e-12) for f in factors)
    assert [g['initial_lr'] for g in wrapper.optimizer.param_groups] == initial

    wrapper = build_optim_wrapper(ToySegmentor(), _optim_cfg())
    scheduler = PolyLR(wrapper, eta_min=0.0, power=1.0, by_epoch=False, begin=0, end=4)
    wrapper.step()
    scheduler.step()
    factors = [g['lr'] / lr0 for g, lr0 in zip(wrapper.optimizer.param_groups, initial)]
    assert factors[0] == pytest.approx(1 - 1 / 3, rel=1e-12)  # (1 - t / T) ** power, T = 3
    assert all(f == pytest.approx(factors[0], rel=1e-12) for f in factors)


def test_logs_group_table() -> None:
    """The constructor logs one table row per group with its lr and weight decay."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        wrapper = build_optim_wrapper(ToySegmentor(), _optim_cfg())
    finally:
        logger.removeHandler(handler)
    text = '\n'.join(r.getMessage() for r in records if 'param groups' in r.getMessage())
    lines = text.splitlines()
    assert '8 param groups' in lines[0]
    for group in wrapper.optimizer.param_groups:
        row = next(line for line in lines if line.startswith(group['group_name'] + ' '))
        assert f'{group["lr"]:.4g}' in row and group['param_names'][0] in row


class NoDepthModel(nn.Module):

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(2, 2)
        self.head = nn.Linear(2, 2)


def test_missing_get_layer_depth_raises() -> None:
    with pytest.raises(TypeError, match='NoDepthModel.*backbone must implement get_layer_depth'):
        build_optim_wrapper(NoDepthModel(), _optim_cfg())
    with pytest.raises(TypeError, match='Sequential.*backbone must implement get_layer_depth'):
        build_optim_wrapper(nn.Sequential(nn.Linear(2, 2)), _optim_cfg())


def test_cfg_validation() -> None:
    with pytest.raises(ValueError, match=r"unknown paramwise_cfg keys \['decay_rate', 'num_layers'\].*allowed keys: "
                       r"\['layer_decay_rate', 'weight_decay_rule', 'no_decay_names', 'bias_decay_mult', "
                       r"'norm_decay_mult'\]"):
        build_optim_wrapper(ToySegmentor(), _optim_cfg(decay_rate=0.9, num_layers=12))
    with pytest.raises(ValueError, match='needs paramwise_cfg=dict\\(layer_decay_rate'):
        build_optim_wrapper(ToySegmentor(), dict(optimizer=dict(type='AdamW', lr=1.0, weight_decay=WD),
                                                 constructor='beit_mm.LayerDecayOptimWrapperConstructor'))
    with pytest.raises(ValueError, match='has no `weight_decay`'):
        build_optim_wrapper(ToySegmentor(), dict(optimizer=dict(type='AdamW', lr=1.0),
                                                 constructor='beit_mm.LayerDecayOptimWrapperConstructor',
                                                 paramwise_cfg=dict(layer_decay_rate=0.5)))
    with pytest.raises(ValueError, match=r'layer_decay_rate must be a number in \(0, 1\]'):
        build_optim_wrapper(ToySegmentor(), _optim_cfg(layer_decay_rate=1.5))


def test_mmpretrain_image_classifier_vit() -> None:
    """mmpretrain ImageClassifier + VisionTransformer (2 layers) + LinearClsHead through build_optim_wrapper."""
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    model = PRETRAIN_MODELS.build(
        dict(
            type='mmpretrain.ImageClassifier',
            backbone=dict(
                type='mmpretrain.VisionTransformer',
                arch=dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
                img_size=32,
                patch_size=16),
            head=dict(type='mmpretrain.LinearClsHead', num_classes=5, in_channels=16)))
    wrapper = build_optim_wrapper(model, _optim_cfg(bias_decay_mult=0.0, norm_decay_mult=0.0))
    groups = wrapper.optimizer.param_groups
    # layers 0..3 x (decay, no_decay): stem (patch_embed weight | cls/pos/patch bias), 2 blocks, final norm + head
    assert [(g['layer_id'], g['weight_decay']) for g in groups] == [(i, wd) for i in range(4) for wd in (WD, 0.0)]
    assert all(g['lr'] == BASE_LR * DECAY**(3 - g['layer_id']) for g in groups)
    got = _per_param(wrapper.optimizer, model)
    assert set(got) == {n for n, p in model.named_parameters() if p.requires_grad}
    assert got['backbone.cls_token'] == (0.125, 0.0)
    assert got['backbone.pos_embed'] == (0.125, 0.0)
    assert got['backbone.patch_embed.projection.weight'] == (0.125, WD)
    assert got['backbone.layers.1.ffn.layers.0.0.weight'] == (0.5, WD)
    assert got['backbone.layers.0.ln1.weight'] == (0.25, 0.0)
    assert got['head.fc.weight'] == (1.0, WD)
    assert got['head.fc.bias'] == (1.0, 0.0)


def test_mmseg_encoder_decoder_with_mmseg_beit_raises() -> None:
    """mmseg's BEiT backbone has no get_layer_depth: clear error instead of class-name dispatch."""
    from mmseg.registry import MODELS as SEG_MODELS
    model = SEG_MODELS.build(
        dict(
            type='mmseg.EncoderDecoder',
            backbone=dict(
                type='mmseg.BEiT',
                img_size=(32, 32),
                patch_size=16,
                embed_dims=16,
                num_layers=2,
                num_heads=2,
                mlp_ratio=2,
                out_indices=(1, )),
            decode_head=dict(
                type='mmseg.FCNHead', in_channels=16, channels=8, num_convs=1, num_classes=3, in_index=0)))
    assert not hasattr(model.backbone, 'get_layer_depth')
    with pytest.raises(TypeError, match='EncoderDecoder.*its backbone BEiT has none.*backbone must implement '
                       'get_layer_depth'):
        build_optim_wrapper(model, _optim_cfg())
