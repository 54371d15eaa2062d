"""Mask2Former panoptic and instance segmentation on BEiT through mmdet 3.3.0's Mask2Former: the COCO demo configs and
the ViT-Adapter panoptic demo train 2 iterations and test in-process (PQ/SQ/RQ, mask AP), the head narrowed further."""
import os.path as osp
import re

import pytest
import torch
from mmdet.models.dense_heads import Mask2FormerHead
from mmdet.models.detectors import Mask2Former
from mmdet.models.seg_heads import MaskFormerFusionHead
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmseg.models.necks import Feature2Pyramid

from beit_mm.apis.testing import run_test
from beit_mm.data.demo.coco import make_demo_coco
from beit_mm.models.backbones import BEiT, BEiTAdapter

from ..conftest import ROOT
from ..support.demo_configs import short_demo

DEMOS = osp.join(ROOT, 'configs', 'demo')
PANOPTIC = osp.join(DEMOS, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')
INSTANCE = osp.join(DEMOS, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py')
ADAPTER = osp.join(DEMOS, 'mask2former_beit-adapter-tiny_1xb8-0.3k_coco-panoptic-demo-64x64.py')
ADE20K_PANOPTIC = osp.join(DEMOS, 'mask2former_beit-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py')
ITERS = 2


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 4, 2, 64, seed=0)


def _build(config: str):
    cfg = Config.fromfile(config)
    init_default_scope(cfg.default_scope)
    from mmengine.registry import MODELS
    return cfg, MODELS.build(cfg.model)


@pytest.mark.parametrize('config,things,stuff', [(PANOPTIC, 2, 3), (INSTANCE, 2, 0), (ADE20K_PANOPTIC, 100, 50)])
def test_demo_builds_mmdet_mask2former_on_beit(config, things, stuff):
    cfg, model = _build(config)
    assert type(model) is Mask2Former and type(model.panoptic_head) is Mask2FormerHead
    assert type(model.panoptic_fusion_head) is MaskFormerFusionHead
    assert type(model.backbone) is BEiT and type(model.neck) is Feature2Pyramid
    head = model.panoptic_head
    assert (head.num_things_classes, head.num_stuff_classes) == (things, stuff)
    assert head.cls_embed.out_features == things + stuff + 1  # + no object
    assert len(head.loss_cls.class_weight) == things + stuff + 1 and head.loss_cls.class_weight[-1] == 0.1
    assert (model.panoptic_fusion_head.num_things_classes, model.panoptic_fusion_head.num_stuff_classes) == (things,
                                                                                                            stuff)
    panoptic = stuff > 0
    assert (model.test_cfg.panoptic_on, model.test_cfg.instance_on) == (panoptic, not panoptic)
    # the backbone's 4 blocks -> 4 pyramid levels at strides 2, 4, 8, 16 of a 64 px input, as the head expects
    with torch.no_grad():
        levels = model.extract_feat(torch.randn(1, 3, 64, 64))
    assert [tuple(level.shape[-2:]) for level in levels] == [(32, 32), (16, 16), (8, 8), (4, 4)]


def _tiny(config: str, coco_root: str, work_dir) -> Config:
    cfg = short_demo(config, coco_root, work_dir, ITERS)
    head = cfg.model.panoptic_head
    head.num_queries = 10
    head.pixel_decoder.encoder.num_layers = 1
    head.transformer_decoder.num_layers = 2
    cfg.model.test_cfg.max_per_image = 10 * (head.num_things_classes + head.num_stuff_classes)  # <= queries x classes
    return cfg


def _log(work_dir) -> str:
    logs = sorted(p for p in work_dir.rglob('*.log'))
    return '\n'.join(p.read_text() for p in logs)


def test_panoptic_demo_trains_then_tests_with_pq(coco_root, tmp_path):
    runner = Runner.from_cfg(_tiny(PANOPTIC, coco_root, tmp_path / 'work'))
    runner.train()
    metrics = runner.test()
    for part in ('', '_th', '_st'):
        for name in ('PQ', 'SQ', 'RQ'):
            assert 0.0 <= metrics[f'coco_panoptic/{name}{part}'] <= 100.0
    log = _log(tmp_path / 'work')
    assert f'Iter(train) [{ITERS}/{ITERS}]' in log and 'd1.loss_dice' in log, log[-2000:]  # mmdet's loss names
    assert '| Things | ' in log and '| Stuff  | ' in log and 'grass-merged' in log, log[-3000:]


def test_ade20k_panoptic_demo_trains_then_tests_with_pq(tmp_path_factory, tmp_path):
    """ADE20K panoptic (semantic + instance PNGs, mmdet's 150 classes, things first) through mmdet's Mask2Former."""
    from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
    root = make_demo_ade20k_panoptic(str(tmp_path_factory.mktemp('ade') / 'demo'), 4, 2, 64, seed=0)
    runner = Runner.from_cfg(_tiny(ADE20K_PANOPTIC, root, tmp_path / 'work'))
    runner.train()
    metrics = runner.test()
    assert 0.0 <= metrics['coco_panoptic/PQ'] <= 100.0
    log = _log(tmp_path / 'work')
    assert f'Iter(train) [{ITERS}/{ITERS}]' in log and '| Things | ' in log and 'road, route' in log, log[-3000:]


def test_adapter_panoptic_demo_builds_trains_then_tests_with_pq(coco_root, tmp_path, capsys):
    """The ViT-Adapter panoptic demo: mmdet's Mask2Former on the tiny BEiTAdapter without a neck, its 4 levels as wide
    as the head's in_channels; trained 2 iterations, then ``tools/test.py``'s library entry prints PQ/SQ/RQ."""
    cfg, model = _build(ADAPTER)
    assert type(model) is Mask2Former and type(model.backbone) is BEiTAdapter and not model.with_neck
    assert (model.panoptic_head.num_things_classes, model.panoptic_head.num_stuff_classes) == (2, 3)
    assert model.data_preprocessor.pad_size_divisor % 32 == 0  # the adapter's deformable levels need multiples of 32
    with torch.no_grad():
        levels = model.extract_feat(torch.randn(1, 3, 64, 64))
    assert [tuple(level.shape[1:]) for level in levels] == [
        (width, 64 // stride, 64 // stride)
        for width, stride in zip(cfg.model.panoptic_head.in_channels, cfg.model.panoptic_head.strides)]
    del model
    tiny = _tiny(ADAPTER, coco_root, tmp_path / 'work')
    Runner.from_cfg(tiny).train()
    tiny.dump(str(tmp_path / 'adapter_panoptic.py'))
    result = run_test(str(tmp_path / 'adapter_panoptic.py'), str(tmp_path / 'work' / f'iter_{ITERS}.pth'),
                      work_dir=str(tmp_path / 'test'))  # tools/test.py, in-process
    assert f'Iter(train) [{ITERS}/{ITERS}]' in _log(tmp_path / 'work')
    metrics = result['metrics']
    for part in ('', '_th', '_st'):
        for name in ('PQ', 'SQ', 'RQ'):
            assert 0.0 <= metrics[f'coco_panoptic/{name}{part}'] <= 100.0
    out = capsys.readouterr().out
    assert re.search(r'Iter\(test\).*coco_panoptic/PQ: [\d.]+ +coco_panoptic/SQ: [\d.]+ +coco_panoptic/RQ: [\d.]+',
                     out), out[-3000:]


MMDET_PANOPTIC = 'configs/mask2former/mask2former_r50_8xb2-lsj-50e_coco-panoptic.py'  # in the mmdet 3.3.0 wheel
BASE = osp.join(ROOT, 'configs', '_base_', 'models', 'mask2former_beit_coco-panoptic.py')


def _unscoped(value):
    """``value`` with every registry name's scope dropped ('mmdet.DiceLoss' -> 'DiceLoss')."""
    if isinstance(value, dict):
        return {k: (v.split('.')[-1] if k == 'type' and isinstance(v, str) else _unscoped(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unscoped(v) for v in value]
    return value


def test_base_model_head_values_are_mmdet_coco_panoptic_ones():
    """The head, fusion head, train_cfg and test_cfg of ``configs/_base_/models/mask2former_beit_coco-panoptic.py``
    equal, value by value, those of mmdet 3.3.0's ``configs/mask2former/mask2former_r50_8xb2-lsj-50e_coco-panoptic.py``
    read from the installed wheel (``mmdet/.mim/``); only the input widths (BEiT's 768 instead of ResNet's 256-2048)
    and the scope prefixes differ. Also the preprocessor's padding rules (D:19-24)."""
    import mmdet
    source = osp.join(osp.dirname(mmdet.__file__), '.mim', MMDET_PANOPTIC)
    assert mmdet.__version__ == '3.3.0' and osp.isfile(source), source
    ref = Config.fromfile(source).model.to_dict()
    ours = Config.fromfile(BASE).model.to_dict()
    ref_head, our_head = _unscoped(ref['panoptic_head']), _unscoped(ours['panoptic_head'])
    assert ref_head.pop('in_channels') == [256, 512, 1024, 2048] and our_head.pop('in_channels') == [768] * 4
    # mmdet's pixel decoder with a deformable attention that runs on every device (its subclass, same arguments)
    assert ref_head['pixel_decoder'].pop('type') == 'MSDeformAttnPixelDecoder'
    assert our_head['pixel_decoder'].pop('type') == 'PortableMSDeformAttnPixelDecoder'
    assert our_head == ref_head
    for key in ('panoptic_fusion_head', 'train_cfg', 'test_cfg', 'init_cfg'):
        assert _unscoped(ours[key]) == _unscoped(ref[key]), key
    for key in ('bgr_to_rgb', 'pad_size_divisor', 'pad_mask', 'mask_pad_value', 'pad_seg', 'seg_pad_value'):
        assert ours['data_preprocessor'][key] == ref['data_preprocessor'][key], key
    assert ours['type'] == 'mmdet.' + ref['type']


# ---- the full-size ViT-Adapter config -------------------------------------------------------------------------------
VIT_ADAPTER = 'czczup/ViT-Adapter@fd64a51'
P = 'detection/configs/mask2former/mask2former_beitv2_adapter_large_16x1_3x_coco-panoptic.py'
B = 'detection/configs/_base_/datasets/coco_panoptic.py'
ADAPTER_PANOPTIC = osp.join(ROOT, 'configs', 'vit_adapter', 'mask2former_beitv2-adapter-large_16xb1-265k_coco-panoptic.py')
SCALES = [(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333), (672, 1333), (704, 1333),
          (736, 1333), (768, 1333), (800, 1333)]


def _policies(c):
    return next(t for t in c.train_dataloader.dataset.pipeline if t['type'].endswith('RandomChoice'))['transforms']


# key -> (published value, where in VIT_ADAPTER); read from the source file, never from the config under test
PINS = {
    'embed_dims': (1024, f'{P}:15'),
    'depth': (24, f'{P}:16'),
    'num_heads': (16, f'{P}:17'),
    'img_size': (224, f'{P}:13'),
    'patch_size': (16, f'{P}:14'),
    'use_abs_pos_emb': (False, f'{P}:20'),
    'use_rel_pos_bias': (True, f'{P}:21'),
    'init_values': (1e-6, f'{P}:22'),
    'drop_path_rate': (0.4, f'{P}:23'),
    'conv_inplane': (64, f'{P}:24'),
    'n_points': (4, f'{P}:25'),
    'deform_num_heads': (16, f'{P}:26'),
    'cffn_ratio': (0.25, f'{P}:27'),
    'deform_ratio': (0.5, f'{P}:28'),
    'interaction_indexes': ([[0, 5], [6, 11], [12, 17], [18, 23]], f'{P}:37'),
    'in_channels': ([1024] * 4, f'{P}:41'),
    'num_things_stuff': ((80, 53), f'{P}:4-5'),
    'num_queries': (100, f'{P}:47'),
    'class_weight': ([1.0] * 133 + [0.1], f'{P}:116'),
    'mean': ([123.675, 116.28, 103.53], f'{P}:164'),
    'std': ([58.395, 57.12, 57.375], f'{P}:164'),
    'pad': (32, f'{P}:203'),
    'flip': (0.5, f'{P}:172'),
    'scales_policy_1': (SCALES, f'{P}:177-179'),
    'scales_policy_2': ([(400, 1333), (500, 1333), (600, 1333)], f'{P}:185'),
    'crop': (('absolute_range', (384, 600), True), f'{P}:189-191'),
    'scales_policy_2_after_crop': (SCALES, f'{P}:193-196'),
    'test_scale': ((1333, 800), f'{P}:213'),
    'batch_per_gpu': (1, f'{P}:226'),
    'lr': (1e-4, f'{P}:239'),
    'betas': ((0.9, 0.999), f'{P}:239'),
    'weight_decay': (0.05, f'{P}:239'),
    'layer_decay_rate': (0.90, f'{P}:241'),
    'grad_clip': (0.01, f'{P}:242'),
    'milestones': ([191750, 236000], f'{P}:249'),
    'gamma': (0.1, f'{P}:247'),
    'warmup': (None, f'{P}:252 warmup_ratio=1.0: no warmup'),
    'max_iters': (265500, f'{P}:255'),
    'interval': (5000, f'{P}:263'),
    'ema_momentum': (0.0001, f'{P}:276'),
    'ann_train': ('annotations/panoptic_train2017.json', f'{B}:41'),
    'ann_val': ('annotations/panoptic_val2017.json', f'{B}:46'),
    'instances_val': ('annotations/instances_val2017.json', f'{P}:231'),
}


def _read(c, key):
    bb, head = c.model.backbone, c.model.panoptic_head
    arch = {'large': dict(embed_dims=1024, num_layers=24, num_heads=16)}[bb.arch]
    policy_1, policy_2 = _policies(c)
    sched = c.param_scheduler
    ema = next(h for h in c.custom_hooks if h['type'].endswith('EMAHook'))
    metric = next(m for m in c.val_evaluator if m['type'].endswith('CocoMetric'))
    readers = {
        'embed_dims': lambda: arch['embed_dims'], 'depth': lambda: arch['num_layers'],
        'num_heads': lambda: arch['num_heads'], 'img_size': lambda: bb.img_size, 'patch_size': lambda: bb.patch_size,
        'use_abs_pos_emb': lambda: bb.use_abs_pos_emb, 'use_rel_pos_bias': lambda: bb.use_rel_pos_bias,
        'init_values': lambda: bb.layer_scale_init_value, 'drop_path_rate': lambda: bb.drop_path_rate,
        'conv_inplane': lambda: bb.conv_inplane, 'n_points': lambda: bb.n_points,
        'deform_num_heads': lambda: bb.deform_num_heads, 'cffn_ratio': lambda: bb.cffn_ratio,
        'deform_ratio': lambda: bb.deform_ratio, 'interaction_indexes': lambda: bb.interaction_indexes,
        'in_channels': lambda: head.in_channels,
        'num_things_stuff': lambda: (head.num_things_classes, head.num_stuff_classes),
        'num_queries': lambda: head.num_queries, 'class_weight': lambda: head.loss_cls.class_weight,
        'mean': lambda: c.model.data_preprocessor.mean, 'std': lambda: c.model.data_preprocessor.std,
        'pad': lambda: c.model.data_preprocessor.pad_size_divisor,
        'flip': lambda: next(t['prob'] for t in c.train_dataloader.dataset.pipeline if t['type'].endswith('RandomFlip')),
        'scales_policy_1': lambda: [tuple(s) for s in policy_1[0]['scales']],
        'scales_policy_2': lambda: [tuple(s) for s in policy_2[0]['scales']],
        'crop': lambda: (policy_2[1]['crop_type'], tuple(policy_2[1]['crop_size']), policy_2[1]['allow_negative_crop']),
        'scales_policy_2_after_crop': lambda: [tuple(s) for s in policy_2[2]['scales']],
        'test_scale': lambda: tuple(next(t['scale'] for t in c.test_dataloader.dataset.pipeline if t['type'].endswith('Resize'))),
        'batch_per_gpu': lambda: c.train_dataloader.batch_size,
        'lr': lambda: c.optim_wrapper.optimizer.lr, 'betas': lambda: tuple(c.optim_wrapper.optimizer.betas),
        'weight_decay': lambda: c.optim_wrapper.optimizer.weight_decay,
        'layer_decay_rate': lambda: c.optim_wrapper.paramwise_cfg.layer_decay_rate,
        'grad_clip': lambda: c.optim_wrapper.clip_grad.max_norm,
        'milestones': lambda: sched[-1]['milestones'], 'gamma': lambda: sched[-1]['gamma'],
        'warmup': lambda: next((s for s in sched if s['type'] == 'LinearLR'), None),
        'max_iters': lambda: c.train_cfg.max_iters, 'interval': lambda: c.train_cfg.val_interval,
        'ema_momentum': lambda: ema['momentum'],
        'ann_train': lambda: c.train_dataloader.dataset.ann_file, 'ann_val': lambda: c.val_dataloader.dataset.ann_file,
        'instances_val': lambda: osp.relpath(metric['ann_file'], c.data_root),
    }
    return readers[key]()


@pytest.mark.parametrize('key', sorted(PINS))
def test_vit_adapter_panoptic_config_has_the_published_value(key):
    value, source = PINS[key]
    assert _read(Config.fromfile(ADAPTER_PANOPTIC), key) == value, f'{VIT_ADAPTER} {source}'


def test_vit_adapter_panoptic_config_builds_and_trains_one_narrowed_step(coco_root, tmp_path):
    """The config as written builds mmdet's Mask2Former around the BEiT v2-L BEiTAdapter; narrowed (4 blocks, a 64-wide
    head, 5 classes, sizes / 10), it takes one training step on the COCO demo."""
    cfg = Config.fromfile(ADAPTER_PANOPTIC)
    init_default_scope(cfg.default_scope)
    from mmengine.registry import MODELS
    from beit_mm.models.backbones import BEiTAdapter
    model = MODELS.build(cfg.model)
    assert type(model) is Mask2Former and type(model.backbone) is BEiTAdapter and not model.with_neck
    assert len(model.backbone.blocks) == 24 and model.panoptic_head.cls_embed.out_features == 134
    del model
    head = cfg.model.panoptic_head
    cfg.model.backbone.update(arch=dict(embed_dims=96, num_layers=4, num_heads=3, mlp_ratio=4.0), deform_num_heads=3,
                              interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]], init_cfg=None, img_size=64)
    cfg.model.backbone.norm_cfg = dict(type='BN', requires_grad=True)
    cfg.model.backbone.pop('arch_large', None)
    head.update(in_channels=[96] * 4, feat_channels=64, out_channels=64, num_queries=10, num_things_classes=2,
                num_stuff_classes=3)
    head.pixel_decoder.encoder.update(num_layers=1, layer_cfg=dict(self_attn_cfg=dict(embed_dims=64, num_heads=4),
                                                                   ffn_cfg=dict(embed_dims=64, feedforward_channels=256)))
    head.pixel_decoder.positional_encoding.num_feats = 32
    head.positional_encoding.num_feats = 32
    head.transformer_decoder.update(num_layers=2, layer_cfg=dict(
        self_attn_cfg=dict(embed_dims=64, num_heads=4), cross_attn_cfg=dict(embed_dims=64, num_heads=4),
        ffn_cfg=dict(embed_dims=64, feedforward_channels=256)))
    head.loss_cls.class_weight = [1.0] * 5 + [0.1]
    cfg.model.panoptic_fusion_head.update(num_things_classes=2, num_stuff_classes=3)
    cfg.model.train_cfg.num_points = 196
    for policy in _policies(cfg):
        for t in policy:
            if 'scales' in t:
                t['scales'] = [(s // 10, m // 10) for s, m in t['scales']]
            if 'crop_size' in t:
                t['crop_size'] = tuple(v // 10 for v in t['crop_size'])
    things, stuff = ('person', 'car'), ('road', 'sky-other-merged', 'grass-merged')
    cfg.train_dataloader.update(num_workers=0, persistent_workers=False, batch_size=2)
    cfg.train_dataloader.dataset.update(data_root=coco_root, metainfo=dict(classes=things + stuff,
                                                                           thing_classes=things, stuff_classes=stuff))
    cfg.optim_wrapper.paramwise_cfg.layer_decay_rate = 0.9
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=1, val_interval=10)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.test_cfg = cfg.test_dataloader = cfg.test_evaluator = None
    cfg.param_scheduler = []
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 10
    cfg.work_dir = str(tmp_path / 'work')
    runner = Runner.from_cfg(cfg)
    runner.train()
    log = _log(tmp_path / 'work')
    assert 'Iter(train) [1/1]' in log and 'loss_dice' in log, log[-2000:]
