"""The Mask2Former configs (mmseg 1.2.2's EncoderDecoder + Mask2FormerHead on mmdet 3.3.0).

- Recipe: every value of reference_recipes.py ``RECIPES_M2F`` against the merged config.
- Schedule: the BEiT-B config's lr at every update equals mmcv 1.x's poly + linear warmup (``test_recipes.mmcv_run``).
- Param groups: the BEiT-B config against ViT-Adapter's
  ``segmentation/mmcv_custom/layer_decay_optimizer_constructor.py`` (lines 21-44 and 71-95),
  its one known difference asserted as such; the CvT-13 config against mmseg's Swin-T rule.
- Training: each full-size config for 2 iterations through tools/train.py on tiny data with only sizes overridden."""
import copy
import glob
import math
import os
import re

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch import nn

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.models.backbones import BEiT, CvT

from ..conftest import ROOT, narrow_beit, run_train, shrink_seg_config
from .reference_recipes import RECIPES_M2F
from .test_recipes import READERS as RECIPE_READERS
from .test_recipes import CHECK_UPDATES, _warmup_updates, mmcv_run, simulate

CFG = os.path.join(ROOT, 'configs', 'mask2former')
CONFIGS = sorted(glob.glob(os.path.join(CFG, '*.py')))
BEIT_B, CVT13 = 'mask2former_beit-base_8xb2-160k_ade20k-640x640.py', 'mask2former_cvt-13_8xb2-160k_ade20k-512x512.py'
DEMO = os.path.join(ROOT, 'configs', 'demo', 'mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')
CROP = 64


def load(name: str) -> Config:
    return Config.fromfile(os.path.join(CFG, name))


def _find(pipeline, kind: str) -> dict:
    return next(t for t in pipeline if t['type'] == kind)


def _train(c: Config) -> list:
    return c.train_dataloader.dataset.pipeline


def _test(c: Config) -> list:
    return c.test_dataloader.dataset.pipeline


def _head(c: Config) -> dict:
    return c.model.decode_head


def _enc(c: Config) -> dict:
    return c.model.decode_head.pixel_decoder.encoder


def _dec(c: Config) -> dict:
    return c.model.decode_head.transformer_decoder


def _scheduler(c: Config, kind: str) -> dict:
    return next(s for s in c.param_scheduler if s['type'] == kind)


def _custom_key(c: Config, key: str) -> dict:
    return dict(c.optim_wrapper.paramwise_cfg.custom_keys[key])


def _same(values: list):
    """The one value of a list whose entries must agree (the list itself otherwise, so the comparison fails)."""
    return values[0] if all(v == values[0] for v in values) else values


READERS = {
    **{key: RECIPE_READERS[key] for key in ('precision.amp', 'precision.dtype', 'precision.loss_scale',
                                            'cudnn.benchmark', 'cudnn.deterministic')},
    'head.feat_channels': lambda c: _head(c).feat_channels,
    'head.out_channels': lambda c: _head(c).out_channels,
    'head.num_queries': lambda c: _head(c).num_queries,
    'head.num_outs': lambda c: (_head(c).pixel_decoder.num_outs, _head(c).num_transformer_feat_level,
                                _enc(c).layer_cfg.self_attn_cfg.num_levels)[0],
    'head.enc_layers': lambda c: _enc(c).num_layers,
    'head.enc_heads': lambda c: _enc(c).layer_cfg.self_attn_cfg.num_heads,
    'head.enc_points': lambda c: _enc(c).layer_cfg.self_attn_cfg.num_points,
    'head.enc_ffn': lambda c: _enc(c).layer_cfg.ffn_cfg.feedforward_channels,
    'head.pos_feats': lambda c: _head(c).positional_encoding.num_feats,
    'head.dec_layers': lambda c: _dec(c).num_layers,
    'head.dec_heads': lambda c: _dec(c).layer_cfg.self_attn_cfg.num_heads,
    'head.dec_ffn': lambda c: _dec(c).layer_cfg.ffn_cfg.feedforward_channels,
    'loss.cls_weight': lambda c: _head(c).loss_cls.loss_weight,
    'loss.no_object_weight': lambda c: _head(c).loss_cls.class_weight[-1],
    'loss.mask_weight': lambda c: _head(c).loss_mask.loss_weight,
    'loss.dice_weight': lambda c: _head(c).loss_dice.loss_weight,
    'loss.num_points': lambda c: _head(c).train_cfg.num_points,
    'loss.oversample_ratio': lambda c: _head(c).train_cfg.oversample_ratio,
    'loss.importance_sample_ratio': lambda c: _head(c).train_cfg.importance_sample_ratio,
    'loss.match_costs': lambda c: tuple(m['weight'] for m in _head(c).train_cfg.assigner.match_costs),
    'model.img_size': lambda c: c.model.backbone.img_size,
    'model.drop_path': lambda c: c.model.backbone.drop_path_rate,
    'model.layer_scale': lambda c: c.model.backbone.layer_scale_init_value,
    'model.abs_pos_emb': lambda c: c.model.backbone.use_abs_pos_emb,
    'model.rel_pos_bias': lambda c: c.model.backbone.use_rel_pos_bias,
    'model.depths': lambda c: list(CvT(arch=c.model.backbone.arch).depths),
    'decode.in_channels': lambda c: list(_head(c).in_channels),
    'optimizer.type': lambda c: c.optim_wrapper.optimizer.type,
    'optimizer.lr': lambda c: c.optim_wrapper.optimizer.lr,
    'optimizer.betas': lambda c: tuple(c.optim_wrapper.optimizer.betas),
    'optimizer.eps': lambda c: c.optim_wrapper.optimizer.eps,
    'optimizer.weight_decay': lambda c: c.optim_wrapper.optimizer.weight_decay,
    'layer_decay': lambda c: c.optim_wrapper.paramwise_cfg.layer_decay_rate,
    'clip_grad': lambda c: None if c.optim_wrapper.get('clip_grad') is None else dict(c.optim_wrapper.clip_grad),
    'paramwise.backbone_lr_mult': lambda c: _custom_key(c, 'backbone')['lr_mult'],
    'paramwise.backbone_norm': lambda c: _custom_key(c, 'backbone.norm'),
    'paramwise.backbone_embed': lambda c: _custom_key(c, 'backbone.stage2.cls_token'),
    'paramwise.query_level_embed': lambda c: _same([_custom_key(c, k) for k in ('query_embed', 'query_feat',
                                                                               'level_embed')]),
    'paramwise.norm_decay_mult': lambda c: c.optim_wrapper.paramwise_cfg.norm_decay_mult,
    'schedule.max_iters': lambda c: c.train_cfg.max_iters,
    'schedule.warmup': lambda c: sum(s.end - s.begin - 1 for s in c.param_scheduler if s.type == 'LinearLR'),
    'schedule.warmup_start': lambda c: _scheduler(c, 'LinearLR').start_factor,
    'schedule.poly_power': lambda c: _scheduler(c, 'PolyLR').power,
    'schedule.min_lr': lambda c: _scheduler(c, 'PolyLR').eta_min,
    'accumulate': lambda c: c.optim_wrapper.get('accumulative_counts', 1),
    'total_batch': lambda c: 8 * c.train_dataloader.batch_size * c.optim_wrapper.get('accumulative_counts', 1),
    'data.mean': lambda c: list(c.model.data_preprocessor.mean),
    'data.std': lambda c: list(c.model.data_preprocessor.std),
    'data.train_scale': lambda c: tuple(_find(_train(c), 'RandomResize').scale),
    'data.ratio_range': lambda c: tuple(_find(_train(c), 'RandomResize').ratio_range),
    'data.short_edge_scales': lambda c: list(_find(_train(c), 'RandomChoiceResize').scales),
    'data.max_size': lambda c: _find(_train(c), 'RandomChoiceResize').max_size,
    'data.crop': lambda c: tuple(_find(_train(c), 'RandomCrop').crop_size),
    'data.cat_max_ratio': lambda c: _find(_train(c), 'RandomCrop').cat_max_ratio,
    'data.flip': lambda c: _find(_train(c), 'RandomFlip').prob,
    'eval.mode': lambda c: c.model.test_cfg.mode,
    'eval.crop': lambda c: tuple(c.model.test_cfg.crop_size),
    'eval.stride': lambda c: tuple(c.model.test_cfg.stride),
    'eval.test_scale': lambda c: tuple(_find(_test(c), 'Resize').scale),
    'eval.size_divisor': lambda c: _find(_test(c), 'ResizeToMultiple').size_divisor,
    'eval.interval': lambda c: c.train_cfg.val_interval,
}
PINNED = [(name, key) for name, refs in sorted(RECIPES_M2F.items()) for key in sorted(refs)]


def test_every_full_size_config_is_pinned_and_every_value_has_a_reader():
    assert sorted(os.path.basename(p) for p in CONFIGS) == sorted([BEIT_B, CVT13])
    assert sorted(os.path.basename(k) for k in RECIPES_M2F) == sorted([BEIT_B, CVT13])
    assert {key for _, key in PINNED} <= set(READERS)


@pytest.mark.parametrize('name,key', PINNED, ids=lambda v: os.path.basename(str(v)))
def test_config_has_the_published_value(name, key):
    ref = RECIPES_M2F[name][key]
    got = READERS[key](Config.fromfile(os.path.join(ROOT, 'configs', name)))
    if isinstance(ref.value, float):
        assert got == pytest.approx(ref.value, rel=1e-12), f'{key}: {got!r}, published {ref.value!r} ({ref.source})'
    else:
        assert got == ref.value, f'{key}: {got!r}, published {ref.value!r} ({ref.source})'


@pytest.mark.parametrize('name', [BEIT_B, CVT13])
def test_head_is_mmseg_mask2former_on_mmdet_and_loss_weights_fit_the_classes(name):
    """The real mmseg Mask2FormerHead (mmdet 3.3.0's inside: pixel decoder, assigner, losses from mmdet's registry),
    150 classes with one loss weight each plus the no-object class's."""
    cfg = load(name)
    assert 'mmdet.models' in cfg.custom_imports.imports and 'beit_mm' in cfg.custom_imports.imports
    head = cfg.model.decode_head
    assert cfg.model.type == 'EncoderDecoder' and head.type == 'Mask2FormerHead' and head.num_classes == 150
    assert len(head.loss_cls.class_weight) == head.num_classes + 1 and set(head.loss_cls.class_weight[:-1]) == {1.0}
    assert head.pixel_decoder.type == 'beit_mm.PortableMSDeformAttnPixelDecoder'
    assert head.train_cfg.assigner.type == 'mmdet.HungarianAssigner'
    assert cfg.val_evaluator.type == 'IoUMetric' and cfg.auto_scale_lr.base_batch_size == 16
    assert 'beit_mm.SegDatasetCheckHook' in [h['type'] for h in cfg.custom_hooks]


def test_beit_schedule_matches_vit_adapter_mmcv_run():
    """ViT-Adapter's lr_config (mmcv 1.x poly, power 1, min_lr 0, linear warmup 1500 from 1e-6): the lr of every one of
    the 160k updates."""
    refs = RECIPES_M2F['mask2former/' + BEIT_B]
    cfg = load(BEIT_B)
    init_default_scope(cfg.default_scope)
    ours = simulate(cfg, cfg.train_cfg.max_iters, None)
    ref = mmcv_run(refs['optimizer.lr'].value, refs['schedule.max_iters'].value, refs['accumulate'].value,
                   refs['schedule.warmup'].value)
    assert len(ours) == len(ref) == 160000
    assert _warmup_updates(ours) == _warmup_updates(ref) == 1500
    for update in CHECK_UPDATES:
        assert ours[update] == pytest.approx(ref[update], rel=1e-6, abs=1e-14), update
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-14)


# ViT-Adapter's constructor puts these head parameters at layer 0 (layer_decay_optimizer_constructor.py:28-37)
VIT_ADAPTER_HEAD_AT_0 = ('decode_head.mask_embed', 'decode_head.cls_embed', 'decode_head.level_embed',
                         'decode_head.query_embed', 'decode_head.query_feat')


def vit_adapter_add_params(named_params, base_wd: float, depth: int, rate: float) -> dict:
    """ViT-Adapter segmentation/mmcv_custom/layer_decay_optimizer_constructor.py ``get_num_layer_for_vit`` (lines
    21-44) and ``LayerDecayOptimizerConstructor.add_params`` (lines 71-95): name -> (lr scale, weight decay)."""
    num_layers = depth + 2  # line 65

    def layer_id(name: str) -> int:
        if name in ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed', 'backbone.visual_embed'):
            return 0
        if name.startswith(('backbone.patch_embed', 'backbone.visual_embed')):
            return 0
        if name.startswith(VIT_ADAPTER_HEAD_AT_0):
            return 0
        if name.startswith(('backbone.blocks', 'backbone.layers')):
            return int(name.split('.')[2]) + 1
        return num_layers - 1

    out = {}
    for name, param in named_params:
        if not param.requires_grad:
            continue
        no_decay = len(param.shape) == 1 or name.endswith('.bias') or name in ('pos_embed', 'cls_token',
                                                                                'visual_embed')
        out[name] = (rate**(num_layers - layer_id(name) - 1), 0.0 if no_decay else base_wd)
    return out


def _groups(model: nn.Module, optim_cfg) -> dict:
    from mmengine.optim import build_optim_wrapper
    wrapper = build_optim_wrapper(model, copy.deepcopy(optim_cfg))
    base_lr = optim_cfg['optimizer']['lr']
    named = {id(p): n for n, p in model.named_parameters()}
    return {named[id(p)]: (group['lr'] / base_lr, group['weight_decay'])
            for group in wrapper.optimizer.param_groups for p in group['params']}


def _build(cfg: Config) -> nn.Module:
    from mmengine.registry import MODELS
    init_default_scope(cfg.default_scope)
    import mmdet.models  # noqa: F401  (custom_imports of the config: mmdet's head parts)
    cfg.model.backbone.pop('init_cfg', None)
    return MODELS.build(cfg.model)


def test_beit_param_groups_match_vit_adapter_constructor():
    """Every parameter of the BEiT-B Mask2Former segmentor (names and ndims of the full model; widths narrowed) gets
    ViT-Adapter's lr scale and weight decay, except its head queries/embeddings (layer 0 there, lr x 0.95^13; the
    known difference: beit_mm's constructor puts every parameter outside the backbone at layer L + 1, scale 1)."""
    refs = RECIPES_M2F['mask2former/' + BEIT_B]
    cfg = load(BEIT_B)
    narrow_beit(cfg)
    model = _build(cfg)
    ours = _groups(model, cfg.optim_wrapper)
    ref = vit_adapter_add_params(model.named_parameters(), refs['optimizer.weight_decay'].value, 12,
                                 refs['layer_decay'].value)
    assert set(ours) == set(ref)
    moved = {n for n in ref if n.startswith(VIT_ADAPTER_HEAD_AT_0)}
    assert len(moved) >= 5 and all(ours[n] == (1.0, ref[n][1]) for n in moved), {n: ours[n] for n in moved}
    wrong = {n: (ours[n], ref[n]) for n in ref if n not in moved
             and (ours[n][1] != ref[n][1] or not math.isclose(ours[n][0], ref[n][0], rel_tol=1e-12))}
    assert not wrong, f'{len(wrong)} parameters differ from ViT-Adapter: {dict(list(wrong.items())[:6])}'
    assert ours['backbone.blocks.0.attn.qkv.weight'][0] == pytest.approx(0.95**12)


def test_cvt_param_groups_follow_the_swin_rule():
    """Every parameter of the CvT-13 Mask2Former segmentor: backbone lr x 0.1 (S:32), no weight decay on the backbone's
    norm layers (LayerNorm and each conv projection's BatchNorm, by module type) and cls token (S:28-29,33-49), on the
    queries and level embeddings (M:155,165-167) and on every other norm layer (M:169); 0.05 elsewhere."""
    refs = RECIPES_M2F['mask2former/' + CVT13]
    cfg = load(CVT13)
    model = _build(cfg)
    wd, mult = refs['optimizer.weight_decay'].value, refs['paramwise.backbone_lr_mult'].value
    norm_params = {id(p) for m in model.modules()
                   if isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm))
                   for p in m.parameters(recurse=False)}
    ref = {}
    for name, p in model.named_parameters():
        backbone = name.startswith('backbone.')
        exempt = (id(p) in norm_params or name == 'backbone.stage2.cls_token'
                  or name.startswith(('decode_head.query_embed', 'decode_head.query_feat', 'decode_head.level_embed')))
        ref[name] = (mult if backbone else 1.0, 0.0 if exempt else wd)
    ours = _groups(model, cfg.optim_wrapper)
    assert set(ours) == set(ref)
    wrong = {n: (ours[n], ref[n]) for n in ref if not (math.isclose(ours[n][0], ref[n][0], rel_tol=1e-12)
                                                        and ours[n][1] == ref[n][1])}
    assert not wrong, f'{len(wrong)} parameters differ from the Swin rule: {dict(list(wrong.items())[:6])}'
    assert sum(1 for n in ref if n.startswith('backbone.') and ref[n][1] == 0.0) > 50  # the norms really are found


# ---------------------------------------------------------------------------------------------- training runs
def _convert(src: str, dst: str, **options) -> None:
    convert_checkpoint(src, dst, **options)


def _official_checkpoint(cfg: Config, tmp_path) -> str:
    """A random file in the backbone's official layout (unilm BEiT pretrained layout; microsoft/CvT flat state dict
    with its classifier), converted by tools/convert_checkpoint.py."""
    src, dst = tmp_path / 'official.pth', tmp_path / 'converted.pth'
    if cfg.model.backbone.type == 'beit_mm.BEiT':
        torch.save({'model': BEiT(arch=cfg.model.backbone.arch, img_size=224, use_rel_pos_bias=False,
                                  use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True).state_dict()},
                   src)
        _convert(str(src), str(dst), model='beit', source='unilm')
    else:
        model = CvT(arch=cfg.model.backbone.arch)
        sd = model.state_dict()
        sd['head.weight'], sd['head.bias'] = torch.randn(1000, model.embed_dims[-1]), torch.randn(1000)
        torch.save(sd, src)
        _convert(str(src), str(dst), model='cvt', source='official')
    return str(dst)


@pytest.mark.parametrize('name', [BEIT_B, CVT13])
def test_full_size_config_trains_and_validates(name, ade_demo_root, tmp_path):
    """2 iterations and a validation through tools/train.py from a converted official file, the dataset checks on; the
    decode head's 30 losses (3 per decoder layer and the final prediction) all logged."""
    cfg = load(name)
    if 'beit' in name:
        narrow_beit(cfg)
    ckpt = _official_checkpoint(cfg, tmp_path)
    cfg = shrink_seg_config(cfg, ade_demo_root, ckpt, str(tmp_path / 'work'), crop=CROP)
    for t in _train(cfg):
        if t.type == 'RandomChoiceResize':  # shorter side 256..1024 for 512 crops -> the same ratios of 64
            t.scales = [s * CROP // 512 for s in t.scales]
            t.max_size = 4 * CROP
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2)]
    cfg.model.decode_head.train_cfg.num_points = 256  # the 16x16 mask logits of a 64 px crop
    cfg_path = tmp_path / name
    log = run_train(cfg, cfg_path)
    assert 'dataset check passed' in log, log[-3000:]
    # (a BEiT file's final norm is unused: the segmentors read blocks 3, 5, 7, 11 without it)
    assert re.search(r'loaded \d+ backbone weights .* \(0 missing, (0|2) unexpected\)', log), log[-3000:]
    losses = re.findall(r'(decode\.(?:d\d\.)?loss_(?:cls|mask|dice)): ', log)
    assert len(set(losses)) == 30, sorted(set(losses))
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert os.path.exists(tmp_path / 'work' / 'iter_2.pth')


def test_demo_config_trains_and_evaluates(ade_demo_root, tmp_path):
    """The demo config through tools/train.py, 4 iterations of 2 images, validation on the tiny set."""
    cfg = Config.fromfile(DEMO)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = ade_demo_root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = 4
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 4
    cfg.work_dir = str(tmp_path / 'work')
    log = run_train(cfg, tmp_path / os.path.basename(DEMO))
    assert 'dataset check passed' in log
    assert 'LayerDecayOptimWrapperConstructor: layer_decay_rate=0.9' in log
    assert re.search(r'Iter\(train\) \[4/4\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert os.path.exists(tmp_path / 'work' / 'iter_4.pth')
