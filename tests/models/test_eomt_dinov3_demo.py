"""The EoMT-DINOv3 demos (configs/demo/eomt_dinov3-*.py) trained a few iterations on the generated data with
MMEngine's Runner in-process, then tested with their metric: the semantic one (mIoU) and the ADE20K panoptic one (PQ).
The runs to the end and their numbers: docs/studies/demos.md."""
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

from ..conftest import ROOT
from .test_panoptic_eomt import _tiny

DEMOS = osp.join(ROOT, 'configs', 'demo')
SEMANTIC = osp.join(DEMOS, 'eomt_dinov3-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')
PANOPTIC = osp.join(DEMOS, 'eomt_dinov3-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py')
ITERS = 2


def test_semantic_demo_trains_then_tests_with_miou(ade_demo_root, tmp_path):
    cfg = Config.fromfile(SEMANTIC)
    assert cfg.model.backbone.type == 'beit_mm.DINOv3'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = ade_demo_root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = ITERS
    cfg.model.mask_annealing = dict(start_steps=[0, 0], end_steps=[1, 1])  # both annealed at the last step
    cfg.param_scheduler = []
    cfg.custom_hooks = [h for h in cfg.custom_hooks if h['type'] != 'beit_mm.SegDatasetCheckHook']
    cfg.default_hooks.checkpoint.interval = ITERS
    cfg.work_dir = str(tmp_path / 'work')
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    assert 0.0 <= metrics['mIoU'] <= 100.0
    assert runner.model.attn_mask_probs.tolist() == [0.0, 0.0]  # annealed away: inference without masks


def test_ade20k_panoptic_demo_trains_then_tests_with_pq(tmp_path_factory, tmp_path):
    from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
    root = make_demo_ade20k_panoptic(str(tmp_path_factory.mktemp('ade') / 'demo'), 4, 2, 64, seed=0)
    cfg = _tiny(PANOPTIC, root, tmp_path / 'work')
    assert cfg.model.backbone.type == 'beit_mm.DINOv3' and cfg.model.task == 'panoptic'
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    assert 0.0 <= metrics['coco_panoptic/PQ'] <= 100.0
    assert {'coco_panoptic/SQ', 'coco_panoptic/RQ'} <= set(metrics)


@pytest.mark.parametrize('config', [SEMANTIC, PANOPTIC])
def test_demo_is_the_beit_demo_with_the_backbone_swapped(config):
    from mmengine.config import Config as C
    ours = C.fromfile(config).to_dict()
    (base, ) = C._get_base_files(config)  # noqa: SLF001  (mmengine's own reader of _base_)
    theirs = C.fromfile(osp.join(DEMOS, base)).to_dict()
    assert ours['model'].pop('backbone')['type'] == 'beit_mm.DINOv3'
    theirs['model'].pop('backbone')
    assert ours == theirs
