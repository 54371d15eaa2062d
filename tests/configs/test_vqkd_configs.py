"""configs/vqkd/: unilm's VQ-KD recipe, checked against the published values (microsoft/unilm at 768a3c87,
``beit2/TOKENIZER.md`` and ``beit2/run_vqkd_training.py``, lines cited per value), and the study's tiny VQ-KD config
training through tools/train.py with a teacher checkpoint written by a beit_mm backbone."""
from __future__ import annotations

import os
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config

from beit_mm.models.tokenizers.vqkd import ARCHS

from ..conftest import ROOT, run_tool

RECIPES = {
    'vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py': ('base_decoder_3x_clip', 3, 512),
    'vqkd-base-p16-dec1x_clip-b16_8xb64-amp-coslr-100e_in1k.py': ('base_decoder_1x_clip', 1, 512),
    'vqkd-base-p16-dec1x_dino-b16_8xb64-amp-coslr-100e_in1k.py': ('base_decoder_1x_dino', 1, 768),
}


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_recipe_matches_unilm(name):
    cfg = Config.fromfile(osp.join(ROOT, 'configs/vqkd', name))
    arch_name, decoder_depth, out_dims = RECIPES[name]
    arch = ARCHS[cfg.model.arch]
    assert cfg.model.arch == arch_name
    # modeling_vqkd.py lines 243-262 / 294-306 / 338-351: ViT-B/16 encoder at 224, decoder depth 1 or 3
    assert arch['encoder'] == dict(embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4.0)
    assert arch['decoder']['num_layers'] == decoder_depth and arch['decoder']['embed_dims'] == 768
    assert (arch['img_size'], arch['patch_size']) == (224, 16)
    assert arch['out_dims'] == out_dims  # modeling_vqkd.py line 69 (CLIP 512) / line 74 (DINO 768)
    assert (arch['num_codes'], arch['code_dims']) == (8192, 32)  # TOKENIZER.md lines 22-23
    assert cfg.model.kmeans_init is True  # TOKENIZER.md line 24 --quantize_kmeans_init
    assert cfg.model.decay == 0.99  # run_vqkd_training.py line 52 --ema_decay default
    assert cfg.model.beta == 1.0  # modeling_vqkd.py line 57 beta=1.0
    assert cfg.model.dead_code_ratio == 0.0  # unilm has no re-seeding
    teacher_type = cfg.model.teacher.type
    assert teacher_type == ('beit_mm.BackboneTeacher' if 'dino' in name else 'beit_mm.CLIPTeacher')
    if 'dino' in name:  # modeling_vqkd.py ScalingLayerForIM lines 236-237
        assert tuple(cfg.model.teacher.mean) == (0.485, 0.456, 0.406)
        assert tuple(cfg.model.teacher.std) == (0.229, 0.224, 0.225)
    assert cfg.train_dataloader.batch_size == 64  # TOKENIZER.md line 26
    assert re.search(r'_8xb64-', name)  # TOKENIZER.md line 11 --nproc_per_node=8
    crop = cfg.train_dataloader.dataset.pipeline[1]
    assert crop.type == 'RandomResizedCrop' and crop.scale == 224
    assert crop.crop_ratio_range == (0.08, 1.0)  # TOKENIZER.md line 19
    assert crop.interpolation == 'bicubic'  # TOKENIZER.md line 18
    assert not any(t.type == 'ColorJitter' for t in cfg.train_dataloader.dataset.pipeline)  # line 91 default 0.
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW'
    assert tuple(opt.betas) == (0.9, 0.99)  # TOKENIZER.md line 28
    assert opt.weight_decay == 1e-4  # TOKENIZER.md line 29
    assert opt.eps == 1e-8  # run_vqkd_training.py line 66
    assert opt.lr == pytest.approx(5e-5 * 64 * 8 / 128)  # run_vqkd_training.py lines 78 and 252
    assert 'clip_grad' not in cfg.optim_wrapper  # run_vqkd_training.py line 70: no clipping by default
    # optim_factory.py line 73: no decay for 1-D params, biases and no_weight_decay() (cls_token, pos_embed)
    pw = cfg.optim_wrapper.paramwise_cfg
    assert pw.flat_decay_mult == 0.0 and pw.bias_decay_mult == 0.0
    assert set(pw.custom_keys) == {'cls_token', 'pos_embed'}
    warmup, cosine = cfg.param_scheduler
    assert warmup.type == 'LinearLR' and (warmup.begin, warmup.end) == (0, 10)  # TOKENIZER.md line 30
    # from 0 (utils.py cosine_scheduler start_warmup_value=0; run_vqkd_training.py lines 268-271 never pass
    # --warmup_lr); 1e-9 stands for 0, the per-step values: tests/configs/test_beit2_recipes.py
    assert warmup.start_factor == 1e-9
    assert cosine.type == 'CosineAnnealingLR' and cosine.eta_min == 1e-5  # line 82 --min_lr
    assert cosine.end == 100 and cfg.train_cfg.max_epochs == 100  # TOKENIZER.md line 31


def test_no_weight_decay_groups():
    """The paramwise_cfg gives unilm's groups: decay exactly on the >= 2-D weights other than cls_token/pos_embed."""
    from mmengine.optim import build_optim_wrapper

    from beit_mm.models.tokenizers import VQKD
    cfg = Config.fromfile(osp.join(ROOT, 'configs/vqkd/vqkd-base-p16-dec1x_clip-b16_8xb64-amp-coslr-100e_in1k.py'))
    small = dict(encoder=dict(embed_dims=32, num_layers=1, num_heads=2, mlp_ratio=2.0),
                 decoder=dict(embed_dims=32, num_layers=1, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=16,
                 num_codes=8, code_dims=4, out_dims=8)
    model = VQKD(arch=small, teacher=dict(type='CLIPTeacher', image_size=32, patch_size=16, width=16, layers=1,
                                         heads=2, output_dim=8))
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay = {id(p) for g in wrapper.optimizer.param_groups if g['weight_decay'] > 0 for p in g['params']}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        expect = p.ndim > 1 and not name.endswith(('cls_token', 'pos_embed'))
        assert (id(p) in decay) == expect, name


def test_study_config_trains_from_a_backbone_teacher(tmp_path):
    """configs/studies/vqkd-tiny-*: 2 iterations through tools/train.py on generated images, the teacher a random
    study BEiT saved as a MIM checkpoint (backbone.* keys); held-out statistics are written."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    from beit_mm.models.backbones import BEiT
    root = tmp_path / 'data'
    make_demo_ade20k(str(root), num_train=8, num_val=4, size=64, seed=0)
    config = osp.join(ROOT, 'configs/studies/vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py')
    cfg = Config.fromfile(config)
    backbone = {k: v for k, v in cfg.model.teacher.backbone.items() if k not in ('type', 'init_cfg')}
    teacher = BEiT(**backbone, with_mask_token=True)
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in teacher.state_dict().items()}}, tmp_path / 'mim.pth')
    work = tmp_path / 'work'
    proc = run_tool([
        'tools/train.py', config, '--work-dir', str(work), '--cfg-options',
        f'model.teacher.backbone.init_cfg.checkpoint={tmp_path / "mim.pth"}',
        f'train_dataloader.dataset.data_root={root}', 'train_dataloader.batch_size=4', 'train_cfg.max_iters=2',
        f'custom_hooks.0.folder={root}/images/validation', 'custom_hooks.0.interval=2', 'custom_hooks.0.num_images=4',
        'train_dataloader.num_workers=1'
    ])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert 'loaded' in log and '0 missing' in log  # the teacher's weights really loaded
    assert re.search(r'Iter\(train\) \[2/1500\]|Iter\(train\) \[2/2\]', log), log[-2000:]
    assert 'VQ-KD held-out' in log and 'teacher cosine' in log
    assert osp.isfile(work / 'tokenizer_eval' / 'iter_2.json')
