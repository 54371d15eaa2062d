"""Every full-size BEiT v2 config builds at its own widths and runs a forward pass, and trains 2 iterations through
tools/train.py on tiny data, narrowed to 64 channels at its own depth: pretraining with a shrunk random ``VQKD``
(both losses logged, ``backbone.cls_pt_layers`` saved), fine-tuning from that checkpoint (0 missing keys), ADE20K
from a random unilm BEiT v2 pretrained-layout file converted by ``tools/convert_checkpoint.py``."""
import glob
import os
import re

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.models.backbones import BEiT

from ..conftest import (ROOT, imagenet_from_ade, narrow_beit, run_full_size_model, run_train, shrink_imagenet_loaders,
                       shrink_seg_config)

CFG = os.path.join(ROOT, 'configs', 'beit2')
PRETRAIN = sorted(glob.glob(os.path.join(CFG, 'beitv2_*_in1k.py')))
FT_IN1K = sorted(glob.glob(os.path.join(CFG, '*_beitv2-*pre_*_in1k.py')))
FT_FROM_PRETRAINING = os.path.join(CFG, 'beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py')
SEG = sorted(glob.glob(os.path.join(CFG, '*ade20k*.py')))
SIZE = 64


def test_every_config_is_run():
    assert len(PRETRAIN) == 3 and len(SEG) == 4
    assert sorted(PRETRAIN + SEG + FT_IN1K) == sorted(glob.glob(os.path.join(CFG, '*.py')))


@pytest.mark.parametrize('config', PRETRAIN + FT_IN1K + SEG, ids=os.path.basename)
def test_full_size_model_runs(config):
    """The config's own BEiT-B/L (no narrowing) with its heads: builds, and a 64 px image gives 150-class logits, 1000
    class scores, or the two MIM losses over 8192 tokens."""
    params, out = run_full_size_model(config)
    if config in SEG:
        assert out.shape == (1, 150, 16, 16)
    elif config in FT_IN1K:
        assert out.shape == (1, 1000)
    else:
        assert {'loss', 'loss_cls_pt'} <= set(out) and float(out['loss']) > 8  # ~ln(8192) = 9.0 at random init
    assert params > (300e6 if 'large' in config else 85e6)


@pytest.fixture(scope='module')
def data(tmp_path_factory, ade_demo_root):
    """The session's ADE20K-layout demo data, and its training images as an ImageNet folder (2 classes,
    meta/{train,val}.txt)."""
    return dict(ade=ade_demo_root,
                imagenet=imagenet_from_ade(ade_demo_root, str(tmp_path_factory.mktemp('beit2data') / 'imagenet')))


TINY_BLOCK = dict(embed_dims=32, num_layers=1, num_heads=2, mlp_ratio=2.0)
TINY_VQKD = dict(encoder=TINY_BLOCK, decoder=TINY_BLOCK, img_size=SIZE, patch_size=16, num_codes=8192, code_dims=8,
                 out_dims=16)


def tiny_tokenizer(work_dir: str) -> str:
    """A tokenize-only VQ-KD file (one narrow block, 8192 random unit codes) in beit_mm's layout; returns its path."""
    from beit_mm.models.tokenizers import VQKD
    os.makedirs(work_dir, exist_ok=True)
    model = VQKD(arch=TINY_VQKD, with_decoder=False)
    model.init_weights()
    torch.manual_seed(0)
    codes = torch.randn(8192, 8)
    model.quantize.embedding.weight.copy_(codes / codes.norm(dim=-1, keepdim=True))
    model.quantize.embedding.initted.fill_(1.0)
    path = os.path.join(work_dir, 'vqkd_tiny.pth')
    torch.save({'state_dict': model.state_dict()}, path)
    return path


def shrink_pretraining(cfg: Config, data_root: str, work_dir: str) -> Config:
    """64 px views, a 4x4 mask of 6 patches, 1 epoch of 4 images in batches of 2, a tiny random-weight VQ-KD tokenizer."""
    cfg.work_dir = work_dir
    narrow_beit(cfg)
    cfg.model.backbone.img_size = SIZE
    cfg.model.target_generator = dict(type='beit_mm.VQKD', with_decoder=False, arch=TINY_VQKD,
                                      init_cfg=dict(type='Pretrained', checkpoint=tiny_tokenizer(work_dir)))
    dl = cfg.train_dataloader
    dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 2
    dl.dataset.update(data_root=data_root, data_prefix='images/training')
    for t in dl.dataset.pipeline:
        if t.type in ('beit_mm.TwoViewRandomResizedCrop', 'beit_mm.DecodeTwoViewRandomResizedCrop'):
            t.size = t.tokenizer_size = SIZE
        if t.type == 'beit_mm.BEiTMaskGenerator':
            t.update(input_size=SIZE // 16, num_masking_patches=6, min_num_patches=2)
    cfg.train_cfg.max_epochs = 1
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 1
    return cfg


@pytest.fixture(scope='module')
def base_pretraining_checkpoint(data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('beit2pt')
    name = 'beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py'
    cfg = shrink_pretraining(Config.fromfile(os.path.join(CFG, name)), data['ade'], str(tmp / 'work'))
    log = run_train(cfg, tmp / name)
    return log, str(tmp / 'work' / 'epoch_1.pth')


@pytest.mark.parametrize('config', PRETRAIN, ids=os.path.basename)
def test_pretraining_config_trains(config, data, base_pretraining_checkpoint, tmp_path):
    if config.endswith('beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py'):
        log, ckpt = base_pretraining_checkpoint
    else:
        cfg = shrink_pretraining(Config.fromfile(config), data['ade'], str(tmp_path / 'work'))
        log, ckpt = run_train(cfg, tmp_path / os.path.basename(config)), str(tmp_path / 'work' / 'epoch_1.pth')
    assert re.search(r'Epoch\(train\)\s+\[1\]\[2/2\].*loss: \d.*loss_cls_pt: \d.*mim_acc_cls_pt: \d', log), log[-3000:]
    state = torch.load(ckpt, map_location='cpu', weights_only=True)['state_dict']
    depth = 24 if 'large' in config else 12
    assert f'backbone.blocks.{depth - 1}.gamma_2' in state and 'backbone.cls_pt_layers.1.mlp.fc2.weight' in state
    assert 'backbone.cls_pt_layers.2.norm1.weight' not in state and 'head.lm_head.weight' in state


def test_imagenet_finetuning_from_the_pretraining_run(base_pretraining_checkpoint, data, tmp_path):
    _, ckpt = base_pretraining_checkpoint
    cfg = Config.fromfile(FT_FROM_PRETRAINING)
    narrow_beit(cfg)  # as the pretraining run
    cfg.model.backbone.update(img_size=SIZE, init_cfg=dict(type='Pretrained', checkpoint=ckpt, prefix='backbone.'))
    cfg.work_dir = str(tmp_path / 'work')
    shrink_imagenet_loaders(cfg, data['imagenet'], SIZE)
    cfg.train_cfg.max_epochs = 1  # 4 images / batch 2 = 2 iterations
    cfg.default_hooks.logger.interval = 1
    log = run_train(cfg, tmp_path / 'ft.py')
    assert 'loaded' in log and '0 missing' in log, log[-3000:]  # the MIM backbone really loaded
    assert 'cls_pt_layers' in log  # reported as checkpoint keys the fine-tuning backbone does not use
    assert re.search(r'Epoch\(train\)\s+\[1\]\[2/2\]', log), log[-2000:]
    assert re.search(r'accuracy/top1: \d', log), log[-2000:]


@pytest.mark.parametrize('config', [c for c in FT_IN1K if c != FT_FROM_PRETRAINING], ids=os.path.basename)
def test_other_imagenet_finetuning_configs_train(config, data, tmp_path):
    """The other fine-tuning recipes (300e base, large) narrowed (random init) train 2 iterations; loading a
    pretraining checkpoint is what the test above checks."""
    cfg = Config.fromfile(config)
    narrow_beit(cfg)
    cfg.model.backbone.update(img_size=SIZE, init_cfg=None)
    cfg.work_dir = str(tmp_path / 'work')
    shrink_imagenet_loaders(cfg, data['imagenet'], SIZE)
    cfg.train_cfg.max_epochs = 1
    cfg.default_hooks.logger.interval = 1
    log = run_train(cfg, tmp_path / os.path.basename(config))
    assert re.search(r'Epoch\(train\)\s+\[1\]\[2/2\]', log), log[-2000:]
    assert re.search(r'accuracy/top1: \d', log), log[-2000:]


@pytest.mark.parametrize('config', SEG, ids=os.path.basename)
def test_segmentation_config_trains(config, data, tmp_path):
    cfg = Config.fromfile(config)
    early = 21 if cfg.model.backbone.arch == 'large' else 9
    narrow_beit(cfg)
    arch = cfg.model.backbone.arch
    src = BEiT(arch=arch, img_size=224, use_rel_pos_bias=False, use_shared_rel_pos_bias=True, with_mask_token=True,
               final_norm=True, cls_pretrain=dict(early_layers=early, head_layers=2)).state_dict()
    width = src['cls_token'].shape[-1]
    src['lm_head.weight'], src['lm_head.bias'] = torch.zeros(8192, width), torch.zeros(8192)
    torch.save({'model': src}, tmp_path / 'official.pth')  # unilm beitv2_*_pt1k.pth layout, random values
    del src
    ckpt = tmp_path / 'converted.pth'
    convert_checkpoint(str(tmp_path / 'official.pth'), str(ckpt), model='beit', source='unilm')
    os.remove(tmp_path / 'official.pth')
    cfg = shrink_seg_config(cfg, data['ade'], str(ckpt), str(tmp_path / 'work'), crop=SIZE)
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2)]
    log = run_train(cfg, tmp_path / os.path.basename(config))
    assert 'loaded' in log and '0 missing' in log, log[-3000:]
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
