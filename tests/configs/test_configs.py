"""Every full-size segmentation config builds at its own widths and runs a forward pass, and trains a few iterations
through tools/train.py on tiny ADE20K-layout data, narrowed, from a random official-layout converted checkpoint."""
import glob
import os
import re

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.models.backbones import BEiT

from ..conftest import ROOT, narrow_beit, run_full_size_model, run_train, shrink_seg_config

# (MIM-pretrained configs: test_mim_configs.py; the FSDP variant: tests/engine/test_fsdp.py)
SEG_CONFIGS = sorted(p for p in glob.glob(os.path.join(ROOT, 'configs/beit/*ade20k*.py'))
                     if 'beit-pre' not in p and 'fsdp' not in p)
CROP = 64


@pytest.mark.parametrize('config', SEG_CONFIGS, ids=os.path.basename)
def test_full_size_model_runs(config):
    """The config's own BEiT-B/L + UPerNet (no narrowing): builds, and a 64 px image gives 150-class logits."""
    params, logits = run_full_size_model(config)
    assert logits.shape == (1, 150, 16, 16)
    assert params > (300e6 if 'large' in config else 85e6)  # BEiT-L 304M, BEiT-B 86M before the heads


@pytest.mark.parametrize('config', SEG_CONFIGS, ids=os.path.basename)
def test_full_size_config_trains(config, ade_demo_root, tmp_path):
    cfg = Config.fromfile(config)
    narrow_beit(cfg)
    arch = cfg.model.backbone.arch
    src = BEiT(arch=arch, img_size=224, use_rel_pos_bias=False, use_shared_rel_pos_bias=True, with_mask_token=True,
               final_norm=True).state_dict()  # unilm pretrained-only layout, random values
    torch.save({'model': src}, tmp_path / 'official.pth')
    ckpt = tmp_path / 'converted.pth'
    convert_checkpoint(str(tmp_path / 'official.pth'), str(ckpt), model='beit', source='unilm')
    cfg = shrink_seg_config(cfg, ade_demo_root, str(ckpt), str(tmp_path / 'work'), crop=CROP)
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2)]
    cfg_path = tmp_path / os.path.basename(config)
    log = run_train(cfg, cfg_path)
    assert 'loaded' in log and '0 missing' in log  # the backbone checkpoint really loaded
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert os.path.exists(tmp_path / 'work' / 'iter_2.pth')


def test_config_builds_mmseg_segmentor_with_beit_mm_backbone():
    """custom_imports=['beit_mm'] + default_scope mmseg: mmseg's EncoderDecoder/UPerHead/ADE20KDataset/IoUMetric around
    beit_mm's BEiT."""
    from mmengine.registry import init_default_scope
    from mmseg.datasets import ADE20KDataset
    from mmseg.models import EncoderDecoder, UPerHead
    from mmseg.registry import DATASETS, METRICS, MODELS

    cfg = Config.fromfile(os.path.join(ROOT, 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py'))
    assert cfg.custom_imports == dict(imports=['beit_mm'], allow_failed_imports=False)
    init_default_scope(cfg.default_scope)
    cfg.model.backbone.arch = dict(embed_dims=32, num_layers=12, num_heads=2, mlp_ratio=2.0)  # sizes only
    model = MODELS.build(cfg.model)
    assert type(model) is EncoderDecoder and type(model.decode_head) is UPerHead
    assert type(model.backbone) is BEiT and type(model.backbone).__module__ == 'beit_mm.models.backbones.beit'
    assert DATASETS.get(cfg.train_dataloader.dataset.type) is ADE20KDataset
    assert METRICS.get(cfg.val_evaluator.type).__module__.startswith('mmseg.')
