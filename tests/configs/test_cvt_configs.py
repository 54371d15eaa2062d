"""CvT configs and CvT checkpoint loading: every full-size config trains 2 iterations on tiny data from a random
official checkpoint converted by ``tools/convert_checkpoint.py``; a classifier checkpoint loads into the segmentor with
``prefix='backbone.'``, missing keys name the converter, unused keys warn; the promised optimizer settings hold."""
import glob
import os
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.fileio import CheckpointFileError
from beit_mm.data.demo.imagenet import make_demo_imagenet
from beit_mm.models.backbones.cvt import CvT

from ..conftest import ROOT, run_train, shrink_seg_config
from .reference_recipes import RECIPES

# MIM configs (beit_cvt-*.py, the algorithm first) are tested in test_cvt_mim.py
CLS_CONFIGS = sorted(p for p in glob.glob(os.path.join(ROOT, 'configs/cvt/*_in1k*.py'))
                     if not os.path.basename(p).startswith('beit_'))
SEG_CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs/cvt/*ade20k*.py')))
DEMO_CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs/demo/cvt-*.py')))
CROP = 64
TINY_W24 = dict(embed_dims=[48, 96, 128], depths=[2, 2, 20], num_heads=[3, 12, 16])  # W24's depths and heads
TINY = dict(embed_dims=[16, 32, 48], depths=[1, 1, 2], num_heads=[1, 2, 3])
CONVERT_HINT = 'tools/convert_checkpoint.py --model cvt'


@pytest.fixture(scope='module')
def imagenet_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('imagenet') / 'imagenet'
    return str(make_demo_imagenet(str(root), num_classes=1000, per_class_train=1, per_class_val=1, size=32))


def official_cvt_file(arch, path: str, num_classes: int = 1000) -> str:
    """A random checkpoint in the official microsoft/CvT layout (flat state dict, BN stats, norm.*, head.*)."""
    model = CvT(arch=arch)
    with torch.no_grad():
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.add_(0.01 * torch.randn_like(t))  # running stats and norms off their init values too
    sd = model.state_dict()
    sd['head.weight'] = torch.randn(num_classes, model.embed_dims[-1])
    sd['head.bias'] = torch.randn(num_classes)
    torch.save(sd, path)
    return path


def convert(src: str, dst: str, **options) -> str:
    """``tools/convert_checkpoint.py --model cvt --source official [options] src dst``'s one call, in process."""
    return convert_checkpoint(src, dst, model='cvt', source='official', **options)


def shrink_cls(cfg: Config, data_root: str, work_dir: str) -> Config:
    """Sizes only: crops, a 4-image subset, batch 2, workers, 2 iterations (1 epoch or max_iters=2)."""
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[loader]
        dl.batch_size = 2
        dl.num_workers = 0
        dl.persistent_workers = False
        dl.dataset.data_root = data_root
        dl.dataset.indices = 4
        for t in dl.dataset.pipeline:
            if t.type == 'RandomResizedCrop':
                t.scale = CROP
            elif t.type == 'ResizeEdge':
                t.scale = CROP * 8 // 7
            elif t.type == 'CenterCrop':
                t.crop_size = CROP
            elif t.type == 'Resize':
                t.scale = (CROP, CROP)
    if cfg.train_cfg.get('type') == 'IterBasedTrainLoop':
        cfg.train_cfg.max_iters = 2
        cfg.train_cfg.val_interval = 2
        cfg.default_hooks.checkpoint.interval = 2
    else:
        cfg.train_cfg.max_epochs = 1  # 4 images / batch 2 = 2 iterations
    cfg.default_hooks.logger.interval = 1
    return cfg


_CLS_LOGS = {}


def run_cls_config(config: str, imagenet_root: str, tmp_path_factory) -> tuple:
    """Train a full-size classification config for 2 iterations (once per session); returns (log, work_dir)."""
    if config not in _CLS_LOGS:
        tmp_path = tmp_path_factory.mktemp(os.path.basename(config)[:-3])
        cfg = Config.fromfile(config)
        if cfg.model.backbone.arch == 'cvt-w24':
            cfg.model.backbone.arch = TINY_W24
            cfg.model.head.in_channels = TINY_W24['embed_dims'][-1]
        if 'init_cfg' in cfg.model.backbone:
            ckpt = convert(official_cvt_file(cfg.model.backbone.arch, str(tmp_path / 'official.pth'), 21841),
                           str(tmp_path / 'converted.pth'))
            cfg.model.backbone.init_cfg.checkpoint = ckpt
        cfg = shrink_cls(cfg, imagenet_root, str(tmp_path / 'work'))
        _CLS_LOGS[config] = (run_train(cfg, tmp_path / 'config.py'), str(tmp_path / 'work'))
    return _CLS_LOGS[config]


@pytest.mark.parametrize('config', CLS_CONFIGS, ids=os.path.basename)
def test_full_size_classification_config_trains(config, imagenet_root, tmp_path_factory):
    log, work_dir = run_cls_config(config, imagenet_root, tmp_path_factory)
    assert re.search(r'(Epoch\(train\) +\[1\]\[2/2\]|Iter\(train\) \[2/2\])', log), log[-2000:]
    assert re.search(r'accuracy/top1: \d', log) and re.search(r'accuracy/top5: \d', log), log[-2000:]
    if 'init_cfg' in Config.fromfile(config).model.backbone:
        assert re.search(r'loaded \d+ backbone weights .*\(0 missing, 0 unexpected\)', log), log[-3000:]
    assert glob.glob(os.path.join(work_dir, '*_2.pth')) or glob.glob(os.path.join(work_dir, 'epoch_1.pth'))


@pytest.mark.parametrize('config', SEG_CONFIGS, ids=os.path.basename)
def test_full_size_segmentation_config_trains(config, ade_demo_root, tmp_path):
    cfg = Config.fromfile(config)
    ckpt = convert(official_cvt_file(cfg.model.backbone.arch, str(tmp_path / 'official.pth')),
                   str(tmp_path / 'converted.pth'))
    shrink_seg_config(cfg, ade_demo_root, ckpt, str(tmp_path / 'work'), crop=CROP)
    log = run_train(cfg, tmp_path / 'config.py')
    assert re.search(r'loaded \d+ backbone weights .*\(0 missing, 0 unexpected\)', log), log[-3000:]
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert os.path.exists(tmp_path / 'work' / 'iter_2.pth')


def _assert_backbone_equals(backbone: torch.nn.Module, expected: dict) -> None:
    sd = backbone.state_dict()
    assert set(sd) == set(expected)
    for k, v in sd.items():
        assert torch.equal(v, expected[k]), k


def test_classifier_checkpoint_loads_into_segmentor(imagenet_root, tmp_path_factory):
    """The epoch checkpoint of the CvT-13 ImageNet run (keys backbone.*, head.fc.*, plus optimizer/message hub) loads
    into the CvT-13 UPerNet segmentor with prefix='backbone.'; every backbone tensor equals the file's."""
    from mmseg.registry import MODELS

    config = os.path.join(ROOT, 'configs/cvt/cvt-13_8xb256-300e_in1k.py')
    _, work_dir = run_cls_config(config, imagenet_root, tmp_path_factory)
    ckpt = os.path.join(work_dir, 'epoch_1.pth')
    state = torch.load(ckpt, map_location='cpu', weights_only=False)['state_dict']
    assert any(k.startswith('head.fc.') for k in state)
    expected = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}

    cfg = Config.fromfile(os.path.join(ROOT, 'configs/cvt/cvt-13_upernet_8xb2-160k_ade20k-512x512.py'))
    cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=ckpt, prefix='backbone.')
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model)
    model.init_weights()
    _assert_backbone_equals(model.backbone, expected)

    cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=ckpt)  # forgot the prefix: loud error
    with pytest.raises(CheckpointFileError, match="whole segmentor.*prefix='backbone.'"):
        MODELS.build(cfg.model).init_weights()


def test_converted_official_file_loads_without_prefix(tmp_path, mm_warnings):
    src = official_cvt_file(TINY, str(tmp_path / 'official.pth'))
    official = torch.load(src, weights_only=True)
    expected = {k: v for k, v in official.items() if not k.startswith('head.')}

    model = CvT(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=convert(src, str(tmp_path / 'a.pth'))))
    model.init_weights()
    _assert_backbone_equals(model, expected)
    assert not [m for m in mm_warnings if 'not used by the backbone' in m]

    model = CvT(arch=TINY, init_cfg=dict(type='Pretrained',
                                         checkpoint=convert(src, str(tmp_path / 'b.pth'), keep_head=True)))
    model.init_weights()  # head.* is not the backbone's: a warning, not an error
    _assert_backbone_equals(model, expected)
    messages = mm_warnings
    assert any('2 checkpoint keys are not used by the backbone' in m and 'head.weight' in m for m in messages)


def test_missing_keys_fail_loudly(tmp_path):
    converted = torch.load(convert(official_cvt_file(TINY, str(tmp_path / 'o.pth')), str(tmp_path / 'c.pth')),
                           weights_only=True)['state_dict']
    partial = dict(converted)
    del partial['stage2.blocks.1.attn.proj_q.weight']
    torch.save({'state_dict': partial}, tmp_path / 'partial.pth')
    with pytest.raises(RuntimeError, match=r'1 of the backbone.*stage2\.blocks\.1\.attn\.proj_q\.weight.*'
                       + re.escape(CONVERT_HINT)):
        CvT(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'partial.pth'))).init_weights()

    wrapped = {'module.' + k: v for k, v in converted.items()}  # a foreign wrapper prefix: nothing matches
    torch.save(wrapped, tmp_path / 'wrapped.pth')
    with pytest.raises(RuntimeError, match=re.escape(CONVERT_HINT) + r' --source \{official,hf\}'):
        CvT(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'wrapped.pth'))).init_weights()

    with pytest.raises(KeyError, match='fix init_cfg.prefix'):  # flat file, prefix given
        CvT(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'c.pth'),
                                     prefix='backbone.')).init_weights()

    other_arch = dict(TINY, depths=[1, 1, 3])  # a deeper model than the file: missing blocks
    with pytest.raises(RuntimeError, match=r'stage2\.blocks\.2\.'):
        CvT(arch=other_arch, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'c.pth'))).init_weights()


@pytest.mark.parametrize('name', ['cvt-13_8xb256-300e_in1k.py', 'cvt-21_8xb128-300e_in1k.py'])
def test_classification_optimizer_follows_official_weight_decay_rules(name):
    """CvT ImageNet configs: one lr for all groups and the published weight decay (CvT-13 0.05, CvT-21 0.1, read from
    the yaml by tests/configs/reference_recipes.py) on Linear/conv weights (depthwise conv projections included, as the
    official WITHOUT_WD_LIST ['bn', 'bias', 'ln'] has no 'dw'), 0 on LayerNorm/BatchNorm, biases and cls_token."""
    from mmengine.optim import build_optim_wrapper
    from mmpretrain.registry import MODELS

    published = RECIPES['cvt/' + name]
    lr, weight_decay = published['optimizer.lr'].value, published['optimizer.weight_decay'].value
    cfg = Config.fromfile(os.path.join(ROOT, 'configs/cvt', name))
    init_default_scope('mmpretrain')
    cfg.model.backbone.arch = TINY
    cfg.model.head.in_channels = TINY['embed_dims'][-1]
    model = MODELS.build(cfg.model)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    wd = {}
    for group in wrapper.optimizer.param_groups:
        assert group['lr'] == pytest.approx(lr, rel=1e-12)
        for param_name in group['param_names']:
            wd[param_name] = group['weight_decay']
    assert set(wd) == {n for n, _ in model.named_parameters()}
    for param_name, value in wd.items():
        no_decay = (param_name.endswith('.bias') or 'norm' in param_name or '.bn.' in param_name
                    or param_name.endswith('cls_token'))
        assert value == (0.0 if no_decay else weight_decay), param_name
    assert wd['backbone.stage0.blocks.0.attn.conv_proj_q.conv.weight'] == weight_decay
    assert wd['head.fc.weight'] == weight_decay and wd['backbone.stage2.cls_token'] == 0.0


@pytest.mark.parametrize('name', ['cvt-13_upernet_8xb2-160k_ade20k-512x512.py',
                                  'cvt-21_upernet_8xb2-160k_ade20k-512x512.py'])
def test_segmentation_optimizer_layer_decay(name):
    """CvT UPerNet configs: lr = lr0 * decay ** (L + 1 - layer_id) with L = sum(depths), lr0 / decay / weight decay as
    tests/configs/reference_recipes.py pins them (mmseg 0.x Swin UPerNet + layer decay 0.9); stage-0 patch embedding id 0,
    stage s block j id sum(depths[:s]) + j + 1 (mmpretrain's Swin rule), heads id L + 1 (lr lr0)."""
    from mmengine.optim import build_optim_wrapper
    from mmseg.registry import MODELS

    published = RECIPES['cvt/' + name]
    lr0, decay = published['optimizer.lr'].value, published['layer_decay'].value
    weight_decay = published['optimizer.weight_decay'].value
    depths = published['model.depths'].value
    top = sum(depths) + 1
    cfg = Config.fromfile(os.path.join(ROOT, 'configs/cvt', name))
    cfg.model.backbone.pop('init_cfg')
    cfg.model.decode_head.channels = 16
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    lr = {n: g['lr'] for g in wrapper.optimizer.param_groups for n in g['param_names']}
    wd = {n: g['weight_decay'] for g in wrapper.optimizer.param_groups for n in g['param_names']}
    stage1_first = depths[0] + 1  # id of stage1.blocks.0
    last = sum(depths)  # id of the last block
    assert lr['backbone.stage0.patch_embed.proj.weight'] == pytest.approx(lr0 * decay**top)
    assert lr['backbone.stage1.blocks.1.mlp.fc1.weight'] == pytest.approx(lr0 * decay**(top - stage1_first - 1))
    assert lr[f'backbone.stage2.blocks.{depths[2] - 1}.attn.proj.weight'] == pytest.approx(lr0 * decay**(top - last))
    assert lr['backbone.stage2.cls_token'] == pytest.approx(lr0 * decay**(top - depths[0] - depths[1]))
    assert lr['decode_head.conv_seg.weight'] == pytest.approx(lr0)
    assert wd['backbone.stage2.cls_token'] == 0.0
    assert wd[f'backbone.stage2.blocks.{depths[2] - 1}.attn.proj.weight'] == weight_decay


def official_drop_path_rates(per_stage, depths):
    """microsoft/CvT lib/models/cls_cvt.py: stage s gets spec['DROP_PATH_RATE'][s] (line 515) and its blocks
    ``[x.item() for x in torch.linspace(0, drop_path_rate, depth)]`` (line 416)."""
    return [[x.item() for x in torch.linspace(0, rate, depth)] for rate, depth in zip(per_stage, depths)]


def _block_rates(model: CvT):
    return [[block.drop_path.drop_prob if hasattr(block.drop_path, 'drop_prob') else 0.0
             for block in getattr(model, f'stage{s}').blocks] for s in range(3)]


FULL_SIZE_CVT = sorted(k for k in RECIPES if k.startswith('cvt/'))


@pytest.mark.parametrize('key', FULL_SIZE_CVT)
def test_drop_path_rates_per_block_match_official(key):
    """Every full-size CvT config's backbone has, block by block, the stochastic-depth rates of the official code for
    its published DROP_PATH_RATE and DEPTH (tests/configs/reference_recipes.py); exact equality (same torch.linspace)."""
    published = RECIPES[key]
    cfg = Config.fromfile(os.path.join(ROOT, 'configs', key))
    bb = dict(cfg.model.backbone)
    bb.pop('type'), bb.pop('init_cfg', None)
    model = CvT(**bb)
    want = official_drop_path_rates(published['model.drop_path_per_stage'].value, published['model.depths'].value)
    assert _block_rates(model) == want


def test_drop_path_rate_forms():
    """A float is the same per-stage rate for every stage; a list needs one rate per stage (official DROP_PATH_RATE)."""
    arch = dict(embed_dims=[16, 32, 48], depths=[2, 3, 4], num_heads=[1, 2, 3])
    assert _block_rates(CvT(arch=arch, drop_path_rate=0.2)) == official_drop_path_rates([0.2] * 3, [2, 3, 4])
    assert _block_rates(CvT(arch=arch, drop_path_rate=[0.05, 0.1, 0.2])) == official_drop_path_rates(
        [0.05, 0.1, 0.2], [2, 3, 4])
    with pytest.raises(ValueError, match='one rate per stage'):
        CvT(arch=arch, drop_path_rate=[0.0, 0.1])


@pytest.mark.parametrize('config', DEMO_CONFIGS, ids=os.path.basename)
def test_demo_configs_build(config):
    """The demo configs build their model (their training is run by tools/run_demo*.sh, not here)."""
    cfg = Config.fromfile(config)
    if cfg.default_scope == 'mmpretrain':
        from mmpretrain.registry import MODELS
    else:
        from mmseg.registry import MODELS
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    x = torch.randn(2, 3, CROP, CROP)
    feats = model.extract_feat(x)
    assert isinstance(model.backbone, CvT) and feats[-1].shape[0] == 2
