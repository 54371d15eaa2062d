"""The MIM configs: recipe values, builds, and the pretrain -> fine-tune -> segment chain through tools/train.py, the
fine-tuning configs loading the demo MIM run's checkpoint (``prefix='backbone.'``, the shared bias expanded)."""
import os
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.models.tokenizers import DALLEEncoder

from ..conftest import ROOT, imagenet_from_ade, run_train, shrink_imagenet_loaders

CFG = os.path.join(ROOT, 'configs/beit')
MIM_800 = os.path.join(CFG, 'beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py')
MIM_300 = os.path.join(CFG, 'beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
MIM_DEMO = os.path.join(ROOT, 'configs', 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')
FT_IN1K = os.path.join(CFG, 'beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py')
FT_ADE = os.path.join(CFG, 'beit-base_beit-pre_upernet_8xb2-160k_ade20k-512x512.py')
FT_SIZE = 64


def test_pretraining_config_structure():
    """beit_mm's own settings of the MIM configs (the published values are compared with unilm in
    test_recipes.py test_config_has_the_published_values)."""
    for path in (MIM_800, MIM_300):
        cfg = Config.fromfile(path)
        assert cfg.custom_imports == dict(imports=['beit_mm'], allow_failed_imports=False)
        bb = cfg.model.backbone
        assert (bb.use_shared_rel_pos_bias, bb.use_rel_pos_bias, bb.with_mask_token, bb.final_norm) == (
            True, False, True, True)
        assert cfg.model.target_generator.init_cfg.checkpoint == cfg.tokenizer_checkpoint
        opt = cfg.optim_wrapper
        assert (opt.type, opt.dtype) == ('beit_mm.AmpOptimWrapper', 'auto')  # unilm's AMP: tests/configs/reference_recipes.py
        warmup, cosine = cfg.param_scheduler
        assert (warmup.end, cosine.begin, cosine.end) == (cosine.begin, warmup.end, cfg.train_cfg.max_epochs)


def test_finetuning_configs_load_the_mim_run():
    cfg = Config.fromfile(FT_IN1K)
    assert cfg.model.backbone.init_cfg == dict(type='Pretrained', checkpoint=cfg.mim_checkpoint, prefix='backbone.')
    assert cfg.mim_checkpoint.endswith('beit_beit-base-p16_8xb256-amp-coslr-800e_in1k/epoch_800.pth')
    ade = Config.fromfile(FT_ADE)
    assert ade.model.backbone.init_cfg.prefix == 'backbone.' and ade.mim_checkpoint == cfg.mim_checkpoint


def test_configs_build_models():
    """Every MIM config builds its model with the registered beit_mm classes (widths shrunk)."""
    from mmengine.registry import MODELS
    from mmpretrain.models import ImageClassifier
    from beit_mm.models.selfsup import BEiTPretrain
    tiny = dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0)
    for path in (MIM_800, MIM_300, MIM_DEMO):
        cfg = Config.fromfile(path)
        init_default_scope(cfg.default_scope)
        cfg.model.backbone.arch = tiny
        cfg.model.head.embed_dims = 32
        cfg.model.target_generator.update(n_hid=8, n_blk_per_group=1, vocab_size=cfg.model.head.vocab_size,
                                          init_cfg=None)
        model = MODELS.build(cfg.model)
        assert type(model) is BEiTPretrain and model.backbone.rel_pos_bias is not None
    cfg = Config.fromfile(FT_IN1K)
    init_default_scope(cfg.default_scope)
    cfg.model.backbone.arch = tiny
    cfg.model.neck.in_channels = cfg.model.head.in_channels = 32
    model = MODELS.build(cfg.model)
    assert type(model) is ImageClassifier and type(model.neck).__name__ == 'MeanPoolNeck'


# ------------------------------------------------------------------------------------ pretrain -> fine-tune chain
@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """ADE20K-layout demo data, and the same images as an ImageNet folder (2 classes, meta/{train,val}.txt)."""
    base = tmp_path_factory.mktemp('mimdata')
    ade = make_demo_ade20k(str(base / 'ade'), num_train=4, num_val=2, size=FT_SIZE, seed=0)
    return dict(ade=ade, imagenet=imagenet_from_ade(ade, str(base / 'imagenet')))


@pytest.fixture(scope='module')
def mim_checkpoint(data, tmp_path_factory):
    """Run the demo MIM config for 2 iterations; return its config and the checkpoint it wrote."""
    tmp = tmp_path_factory.mktemp('mim')
    cfg = Config.fromfile(MIM_DEMO)
    tok = DALLEEncoder(**cfg.tokenizer)
    torch.save(tok.state_dict(), tmp / 'tokenizer.pth')  # random weights, real key layout
    cfg.model.target_generator.init_cfg.checkpoint = str(tmp / 'tokenizer.pth')
    cfg.work_dir = str(tmp / 'work')
    dl = cfg.train_dataloader
    dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 4
    dl.dataset.data_root = data['ade']
    cfg.train_cfg.max_iters = 2
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    log = run_train(cfg, tmp / 'mim.py')
    assert re.search(r'Iter\(train\) \[2/2\].*loss: \d.*mim_acc: \d', log), log[-2000:]
    ckpt = tmp / 'work' / 'iter_2.pth'
    assert ckpt.exists()
    state = torch.load(ckpt, map_location='cpu', weights_only=True)['state_dict']
    assert 'backbone.rel_pos_bias.relative_position_bias_table' in state and 'head.lm_head.weight' in state
    assert torch.equal(state['target_generator.blocks.input.weight'], tok.state_dict()['blocks.input.weight'])
    return cfg, str(ckpt)


def test_imagenet_finetuning_from_mim_checkpoint(mim_checkpoint, data, tmp_path):
    mim_cfg, ckpt = mim_checkpoint
    cfg = Config.fromfile(FT_IN1K)
    width = mim_cfg.embed_dims
    cfg.model.backbone.update(arch=mim_cfg.model.backbone.arch, img_size=FT_SIZE)
    cfg.model.backbone.init_cfg.checkpoint = ckpt
    cfg.model.neck.in_channels = cfg.model.head.in_channels = width
    cfg.work_dir = str(tmp_path / 'work')
    shrink_imagenet_loaders(cfg, data['imagenet'], FT_SIZE)
    cfg.train_cfg.max_epochs = 1  # 4 images / batch 2 = 2 iterations
    cfg.default_hooks.logger.interval = 1
    log = run_train(cfg, tmp_path / 'ft.py')
    assert 'loaded' in log and '0 missing' in log, log[-3000:]  # the MIM backbone really loaded
    assert re.search(r'Epoch\(train\)\s+\[1\]\[2/2\]', log), log[-2000:]
    assert re.search(r'accuracy/top1: \d', log), log[-2000:]


def test_ade20k_finetuning_from_mim_checkpoint(mim_checkpoint, data, tmp_path):
    mim_cfg, ckpt = mim_checkpoint
    cfg = Config.fromfile(FT_ADE)
    width = mim_cfg.embed_dims
    cfg.model.backbone.update(arch=mim_cfg.model.backbone.arch, img_size=FT_SIZE, out_indices=(0, 1, 2, 3))
    cfg.model.backbone.init_cfg.checkpoint = ckpt
    cfg.model.neck.embed_dim = width
    cfg.model.decode_head.update(in_channels=[width] * 4, channels=32)
    cfg.model.auxiliary_head.in_channels = width
    cfg.model.data_preprocessor.size = (FT_SIZE, FT_SIZE)
    cfg.model.test_cfg.update(crop_size=(FT_SIZE, FT_SIZE), stride=(FT_SIZE * 2 // 3, ) * 2)
    cfg.work_dir = str(tmp_path / 'work')
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[name]
        dl.num_workers, dl.persistent_workers = 0, False
        dl.dataset.data_root = data['ade']
        for t in dl.dataset.pipeline:
            if t.type in ('RandomResize', 'Resize'):
                t.scale = (4 * FT_SIZE, FT_SIZE)
            if t.type.split('.')[-1] in ('RandomCrop', 'HistogramRandomCrop'):
                t.crop_size = (FT_SIZE, FT_SIZE)
    cfg.train_cfg.update(max_iters=2, val_interval=2)
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2)]
    log = run_train(cfg, tmp_path / 'ade.py')
    assert 'loaded' in log and '0 missing' in log, log[-3000:]
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
