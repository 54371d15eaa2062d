"""Mask2Former panoptic and instance segmentation on BEiT (issue 50 item 2) through mmdet 3.3.0's real Mask2Former,
Mask2FormerHead and MaskFormerFusionHead: the demo configs (``configs/demo/mask2former_beit-tiny-p8_*_coco-{panoptic,
instance}-demo-64x64.py``) build with beit_mm's BEiT and mmseg's Feature2Pyramid in mmdet's detector, then train 2
iterations and test in-process with MMEngine's Runner on the COCO-layout demo, printing PQ/SQ/RQ (all, things, stuff)
and mask AP (pycocotools). The head is narrowed further here (1 encoder and 2 decoder layers, 10 queries, so at most 10 x classes instances) so that a
step stays short on 2 loaded cores; the configs' own structure is what the build test checks.
"""
import os.path as osp

import pytest
import torch
from mmdet.models.dense_heads import Mask2FormerHead
from mmdet.models.detectors import Mask2Former
from mmdet.models.seg_heads import MaskFormerFusionHead
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmseg.models.necks import Feature2Pyramid

from beit_mm.data.demo_coco import make_demo_coco
from beit_mm.models.backbones import BEiT

from .conftest import ROOT

DEMOS = osp.join(ROOT, 'configs', 'demo')
PANOPTIC = osp.join(DEMOS, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')
INSTANCE = osp.join(DEMOS, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py')
ITERS = 2


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 4, 2, 64, seed=0)


def _build(config: str):
    cfg = Config.fromfile(config)
    init_default_scope(cfg.default_scope)
    from mmengine.registry import MODELS
    return cfg, MODELS.build(cfg.model)


@pytest.mark.parametrize('config,things,stuff', [(PANOPTIC, 2, 3), (INSTANCE, 2, 0)])
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
    cfg = Config.fromfile(config)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = coco_root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    if 'ann_file' in cfg.val_evaluator:
        cfg.val_evaluator.ann_file = cfg.test_evaluator.ann_file = osp.join(coco_root, 'annotations',
                                                                            'instances_val2017.json')
    head = cfg.model.panoptic_head
    head.num_queries = 10
    head.pixel_decoder.encoder.num_layers = 1
    head.transformer_decoder.num_layers = 2
    cfg.model.test_cfg.max_per_image = 10 * len(cfg.train_dataloader.dataset.metainfo['classes'])  # <= queries x classes
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = ITERS
    cfg.param_scheduler = []
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = ITERS
    cfg.work_dir = str(work_dir)
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


def test_instance_demo_trains_then_tests_with_mask_ap(coco_root, tmp_path, capsys):
    runner = Runner.from_cfg(_tiny(INSTANCE, coco_root, tmp_path / 'work'))
    runner.train()
    metrics = runner.test()
    assert {'coco/segm_mAP', 'coco/segm_mAP_50', 'coco/segm_mAP_75'} <= set(metrics)
    assert 0.0 <= metrics['coco/segm_mAP'] <= 1.0
    assert 'Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]' in capsys.readouterr().out


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
    assert our_head == ref_head
    for key in ('panoptic_fusion_head', 'train_cfg', 'test_cfg', 'init_cfg'):
        assert _unscoped(ours[key]) == _unscoped(ref[key]), key
    for key in ('bgr_to_rgb', 'pad_size_divisor', 'pad_mask', 'mask_pad_value', 'pad_seg', 'seg_pad_value'):
        assert ours['data_preprocessor'][key] == ref['data_preprocessor'][key], key
    assert ours['type'] == 'mmdet.' + ref['type']
