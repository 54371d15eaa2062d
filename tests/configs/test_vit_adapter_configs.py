"""The full-size ViT-Adapter configs (configs/vit_adapter/): every recipe value pinned to the ViT-Adapter file and line
it was read from (compared with the merged config, never with the config's own literals), and one training step of
each, narrowed to 64 channels at its own depth (``conftest.narrow_beit``), in process."""
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample

from beit_mm.models.backbones.beit_adapter import ADAPTER_WEIGHTS

from ..conftest import ROOT, narrow_beit
from .test_recipes import READERS as RECIPE_READERS

CFG = os.path.join(ROOT, 'configs', 'vit_adapter')
UPERNET = 'beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py'
M2F = 'mask2former_beit-adapter-large_8xb2-160k_ade20k-640x640.py'
UPERNET_B = 'beit-adapter-base_upernet_8xb2-160k_ade20k-640x640.py'
M2F_B = 'mask2former_beit-adapter-base_8xb2-160k_ade20k-640x640.py'

# czczup/ViT-Adapter@fd64a51 segmentation/configs/ade20k/: U = upernet_beit_adapter_large_640_160k_ade20k_ss.py,
# M = mask2former_beit_adapter_large_640_160k_ade20k_ss.py; S = _base_/schedules/schedule_160k.py;
# C = segmentation/configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py (the BEiT-B
# adapter: ViT-Adapter publishes none on ADE20K; the B configs are U / M with C's BEiT-B values).
BACKBONE = {
    'backbone.img_size': (640, 'U:15, M:15'),
    'backbone.patch_size': (16, 'U:16, M:16'),
    'backbone.arch': ('large', 'U:17-20, M:17-20 (1024 wide, 24 blocks, 16 heads, mlp 4)'),
    'backbone.use_abs_pos_emb': (False, 'U:22, M:22'),
    'backbone.use_rel_pos_bias': (True, 'U:23, M:23'),
    'backbone.layer_scale_init_value': (1e-6, 'U:24, M:24'),
    'backbone.drop_path_rate': (0.3, 'U:25, M:25'),
    'backbone.conv_inplane': (64, 'U:26, M:26'),
    'backbone.n_points': (4, 'U:27, M:27'),
    'backbone.deform_num_heads': (16, 'U:28, M:28'),
    'backbone.cffn_ratio': (0.25, 'U:29, M:29'),
    'backbone.deform_ratio': (0.5, 'U:30, M:30'),
    'backbone.with_cp': (True, 'U:31, M:31'),
    'backbone.interaction_indexes': ([[0, 5], [6, 11], [12, 17], [18, 23]], 'U:32, M:32'),
    'crop': ((640, 640), 'U:8, M:8'),
    'data.mean': ([123.675, 116.28, 103.53], 'U:46, M:107'),
    'data.std': ([58.395, 57.12, 57.375], 'U:46, M:107'),
    'data.train_scale': ((2048, 640), 'U:50, M:111'),
    'data.ratio_range': ((0.5, 2.0), 'U:50, M:111'),
    'data.cat_max_ratio': (0.75, 'U:51, M:112'),
    'data.flip': (0.5, 'U:52, M:113'),
    'eval.test_scale': ((2048, 640), 'U:63, M:125'),
    'eval.size_divisor': (32, 'U:68, M:130'),
    'eval.mode': ('slide', 'U:43, M:103'),
    'eval.stride': ((426, 426), 'U:43, M:103'),
    'optimizer.lr': (2e-5, 'U:75, M:137'),
    'optimizer.betas': ((0.9, 0.999), 'U:75, M:137'),
    'optimizer.weight_decay': (0.05, 'U:75, M:137'),
    'layer_decay': (0.90, 'U:77, M:139'),
    'schedule.warmup': (1500, 'U:81, M:143'),
    'schedule.warmup_start': (1e-6, 'U:81, M:144'),
    'schedule.poly_power': (1.0, 'U:82, M:145'),
    'schedule.min_lr': (0.0, 'U:82, M:145'),
    'schedule.max_iters': (160000, 'S:7'),
    'total_batch': (16, 'U:83, M:146 (2 per GPU) x 8 GPUs (README.md:39-40 "8x2")'),
}
# Precision and cuDNN as ViT-Adapter trains (every config: U, M, C): fp32, its runner is mmcv's IterBasedRunner (U:87,
# M:150, C:147), not unilm's IterBasedRunnerAmp, and S:3's optimizer_config = dict() has no fp16 hook; its launcher
# (segmentation/dist_train.sh:9) passes --deterministic, so train.py:167 (mmseg 0.x set_random_seed) sets
# cudnn.deterministic = True and cudnn.benchmark = False after train.py:107-108 set the config's cudnn_benchmark = True.
PRECISION = {
    'precision.amp': (False, 'U:87, M:150, C:147 IterBasedRunner; S:3 optimizer_config = dict()'),
    'precision.dtype': (None, 'U:87, M:150, C:147: fp32'),
    'precision.loss_scale': (None, 'U:87, M:150, C:147: fp32'),
    'cudnn.benchmark': (False, 'dist_train.sh:9 --deterministic -> train.py:167'),
    'cudnn.deterministic': (True, 'dist_train.sh:9 --deterministic -> train.py:167'),
}
BACKBONE.update(PRECISION)
# The BEiT-B adapter (C's sizes, lr, layer decay and drop path) at U's and M's ADE20K 640 crop.
BACKBONE_B = {**PRECISION,
    'backbone.img_size': (640, 'U:15, M:15 (the ADE20K crop; C:15 is its 512)'),
    'backbone.patch_size': (16, 'C:16'),
    'backbone.arch': ('base', 'C:17-20 (768 wide, 12 blocks, 12 heads, mlp 4)'),
    'backbone.use_abs_pos_emb': (False, 'C:22'),
    'backbone.use_rel_pos_bias': (True, 'C:23'),
    'backbone.layer_scale_init_value': (1e-6, 'C:24'),
    'backbone.drop_path_rate': (0.2, 'C:25'),
    'backbone.conv_inplane': (64, 'C:26'),
    'backbone.n_points': (4, 'C:27'),
    'backbone.deform_num_heads': (12, 'C:28'),
    'backbone.cffn_ratio': (0.25, 'C:29'),
    'backbone.deform_ratio': (0.5, 'C:30'),
    'backbone.with_cp': (False, 'none in C: mmseg_custom/models/backbones/beit_adapter.py:25 default'),
    'backbone.interaction_indexes': ([[0, 2], [3, 5], [6, 8], [9, 11]], 'C:31'),
    'optimizer.lr': (3e-5, 'C:134'),
    'optimizer.betas': ((0.9, 0.999), 'C:134'),
    'optimizer.weight_decay': (0.05, 'C:134, U:75, M:137'),
    'layer_decay': (0.95, 'C:136'),
    'schedule.warmup': (1500, 'C:140, U:81, M:143'),
    'schedule.warmup_start': (1e-6, 'C:141, U:81, M:144'),
    'schedule.poly_power': (1.0, 'C:142, U:82, M:145'),
    'schedule.min_lr': (0.0, 'C:142, U:82, M:145'),
    'schedule.max_iters': (160000, 'S:7'),
}
ADE20K_U = {
    'crop': ((640, 640), 'U:8'),
    'data.mean': ([123.675, 116.28, 103.53], 'U:46'),
    'data.std': ([58.395, 57.12, 57.375], 'U:46'),
    'data.train_scale': ((2048, 640), 'U:50'),
    'data.ratio_range': ((0.5, 2.0), 'U:50'),
    'data.cat_max_ratio': (0.75, 'U:51'),
    'data.flip': (0.5, 'U:52'),
    'eval.test_scale': ((2048, 640), 'U:63'),
    'eval.size_divisor': (32, 'U:68'),
    'eval.mode': ('slide', 'U:43'),
    'eval.stride': ((426, 426), 'U:43'),
    'eval.interval': (16000, 'U:89'),
    'total_batch': (16, 'U:83 (2 per GPU) x 8 GPUs (README.md:39 "8x2")'),
}
ADE20K_M = {
    'crop': ((640, 640), 'M:8'),
    'data.mean': ([123.675, 116.28, 103.53], 'M:107'),
    'data.std': ([58.395, 57.12, 57.375], 'M:107'),
    'data.train_scale': ((2048, 640), 'M:111'),
    'data.ratio_range': ((0.5, 2.0), 'M:111'),
    'data.cat_max_ratio': (0.75, 'M:112'),
    'data.flip': (0.5, 'M:113'),
    'eval.test_scale': ((2048, 640), 'M:125'),
    'eval.size_divisor': (32, 'M:130'),
    'eval.mode': ('slide', 'M:103'),
    'eval.stride': ((426, 426), 'M:103'),
    'eval.interval': (16000, 'M:152'),
    'total_batch': (16, 'M:146 (2 per GPU) x 8 GPUs (README.md:40 "8x2")'),
}
RECIPES = {
    UPERNET: {**BACKBONE,
              'head.in_channels': ([1024] * 4, 'U:35'),
              'head.channels': (1024, 'U:37'),
              'aux.in_channels': (1024, 'U:40'),
              'eval.interval': (16000, 'U:89')},
    M2F: {**BACKBONE,
          'head.in_channels': ([1024] * 4, 'M:35'),
          'head.feat_channels': (1024, 'M:36'),
          'head.out_channels': (1024, 'M:37'),
          'head.num_queries': (100, 'M:38'),
          'head.enc_heads': (32, 'M:52'),
          'head.enc_ffn': (4096, 'M:63'),
          'head.pos_feats': (512, 'M:71, 74'),
          'head.dec_heads': (32, 'M:84'),
          'head.dec_ffn': (4096, 'M:91')},
    UPERNET_B: {**BACKBONE_B, **ADE20K_U,
                # U sets the heads' widths to the ViT's (1024 for BEiT-L); BEiT-B's is 768, as unilm's BEiT-B
                # UPerNet at 640 (upernet_beit_base_12_640_slide_160k_ade20k_pt2ft.py:37-42)
                'head.in_channels': ([768] * 4, 'U:35 at BEiT-B width (C:34)'),
                'head.channels': (768, 'U:37 at BEiT-B width'),
                'aux.in_channels': (768, 'U:40 at BEiT-B width'),
                'aux.channels': (256, '_base_/models/upernet_beit.py:44')},
    M2F_B: {**BACKBONE_B, **ADE20K_M,
            'head.in_channels': ([768] * 4, 'C:34'),
            'head.feat_channels': (256, 'C:35'),
            'head.out_channels': (256, 'C:36'),
            'head.num_queries': (100, 'C:37'),
            'head.enc_heads': (8, 'C:51'),
            'head.enc_ffn': (1024, 'C:62'),
            'head.pos_feats': (128, 'C:69, 72'),
            'head.dec_heads': (8, 'C:82'),
            'head.dec_ffn': (2048, 'C:89')},
}


def _find(pipeline, kind):
    return next(t for t in pipeline if t['type'] == kind)


def _same(values: list):
    """The one value of a list whose entries must agree (the list itself otherwise, so the comparison fails)."""
    return values[0] if all(v == values[0] for v in values) else values


def _sched(c, kind):
    return next(s for s in c.param_scheduler if s['type'] == kind)


READERS = {
    **{key: RECIPE_READERS[key] for key in PRECISION},
    'crop': lambda c: tuple(_find(c.train_dataloader.dataset.pipeline, 'RandomCrop').crop_size),
    'data.mean': lambda c: list(c.model.data_preprocessor.mean),
    'data.std': lambda c: list(c.model.data_preprocessor.std),
    'data.train_scale': lambda c: tuple(_find(c.train_dataloader.dataset.pipeline, 'RandomResize').scale),
    'data.ratio_range': lambda c: tuple(_find(c.train_dataloader.dataset.pipeline, 'RandomResize').ratio_range),
    'data.cat_max_ratio': lambda c: _find(c.train_dataloader.dataset.pipeline, 'RandomCrop').cat_max_ratio,
    'data.flip': lambda c: _find(c.train_dataloader.dataset.pipeline, 'RandomFlip').prob,
    'eval.test_scale': lambda c: tuple(_find(c.test_dataloader.dataset.pipeline, 'Resize').scale),
    'eval.size_divisor': lambda c: _find(c.test_dataloader.dataset.pipeline, 'ResizeToMultiple').size_divisor,
    'eval.mode': lambda c: c.model.test_cfg.mode,
    'eval.stride': lambda c: tuple(c.model.test_cfg.stride),
    'eval.interval': lambda c: c.train_cfg.val_interval,
    'optimizer.lr': lambda c: c.optim_wrapper.optimizer.lr,
    'optimizer.betas': lambda c: tuple(c.optim_wrapper.optimizer.betas),
    'optimizer.weight_decay': lambda c: c.optim_wrapper.optimizer.weight_decay,
    'layer_decay': lambda c: c.optim_wrapper.paramwise_cfg.layer_decay_rate,
    'schedule.warmup': lambda c: sum(s.end - s.begin - 1 for s in c.param_scheduler if s.type == 'LinearLR'),
    'schedule.warmup_start': lambda c: _sched(c, 'LinearLR').start_factor,
    'schedule.poly_power': lambda c: _sched(c, 'PolyLR').power,
    'schedule.min_lr': lambda c: _sched(c, 'PolyLR').eta_min,
    'schedule.max_iters': lambda c: c.train_cfg.max_iters,
    'total_batch': lambda c: 8 * c.train_dataloader.batch_size * c.optim_wrapper.get('accumulative_counts', 1),
    'head.in_channels': lambda c: list(c.model.decode_head.in_channels),
    'head.channels': lambda c: c.model.decode_head.channels,
    'aux.in_channels': lambda c: c.model.auxiliary_head.in_channels,
    'aux.channels': lambda c: c.model.auxiliary_head.channels,
    'head.feat_channels': lambda c: c.model.decode_head.feat_channels,
    'head.out_channels': lambda c: c.model.decode_head.out_channels,
    'head.num_queries': lambda c: c.model.decode_head.num_queries,
    'head.enc_heads': lambda c: c.model.decode_head.pixel_decoder.encoder.layer_cfg.self_attn_cfg.num_heads,
    'head.enc_ffn': lambda c: c.model.decode_head.pixel_decoder.encoder.layer_cfg.ffn_cfg.feedforward_channels,
    'head.pos_feats': lambda c: _same([c.model.decode_head.positional_encoding.num_feats,
                                       c.model.decode_head.pixel_decoder.positional_encoding.num_feats]),
    'head.dec_heads': lambda c: c.model.decode_head.transformer_decoder.layer_cfg.self_attn_cfg.num_heads,
    'head.dec_ffn': lambda c: c.model.decode_head.transformer_decoder.layer_cfg.ffn_cfg.feedforward_channels,
}


def read(cfg: Config, key: str):
    if key.startswith('backbone.'):
        value = cfg.model.backbone[key[len('backbone.'):]]
        return [list(v) for v in value] if key.endswith('interaction_indexes') else value
    return READERS[key](cfg)


PINNED = [(name, key) for name in sorted(RECIPES) for key in sorted(RECIPES[name])]


def test_every_full_size_config_is_pinned():
    names = sorted(f for f in os.listdir(CFG) if f.endswith('.py') and 'demo' not in f and 'ade20k' in f)  # others: test_dataset_configs.py
    assert names == sorted(RECIPES)


@pytest.mark.parametrize('name,key', PINNED)
def test_config_has_the_published_value(name, key):
    value, source = RECIPES[name][key]
    got = read(Config.fromfile(os.path.join(CFG, name)), key)
    assert got == value, f'{name} {key} = {got!r}, ViT-Adapter {source}: {value!r}'


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_the_adapter_starts_from_its_beit_with_its_own_weights_at_init(name):
    cfg = Config.fromfile(os.path.join(CFG, name))
    assert cfg.model.backbone.type == 'beit_mm.BEiTAdapter' and cfg.model.neck is None
    # the converted unilm checkpoint of the config's own size (beit-base_... for BEiT-B, beit-large_... for BEiT-L)
    assert os.path.basename(cfg.model.backbone.init_cfg.checkpoint).startswith(f'beit-{cfg.model.backbone.arch}_')
    assert tuple(cfg.model.backbone.init_cfg.keep_init) == ADAPTER_WEIGHTS
    assert cfg.optim_wrapper.paramwise_cfg.weight_decay_rule == 'unilm'  # layer_decay_optimizer_constructor.py:74-75
    assert tuple(cfg.optim_wrapper.paramwise_cfg.no_decay_names) == ()


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_narrowed_config_builds_and_takes_a_training_step(name):
    """The config's model at 64 channels and 64 px (depth, interactions, heads and losses kept): one optimizer step
    through its own optim wrapper constructor (layer decay over ``BEiTAdapter.get_layer_depth``)."""
    import mmdet.models  # noqa: F401  (the Mask2Former head's parts)
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = Config.fromfile(os.path.join(CFG, name))
    width = narrow_beit(cfg)
    head = cfg.model.decode_head
    if 'pixel_decoder' in head:
        head.train_cfg.num_points = 256  # of a 64 x 64 mask
        if head.feat_channels == width:  # a head as wide as the ViT (BEiT-L's) follows it to 64 (narrow_beit has
            head.feat_channels = head.out_channels = 64  # narrowed its attention and FFN widths); BEiT-B's 256
            head.positional_encoding.num_feats = head.pixel_decoder.positional_encoding.num_feats = 32  # stays
    cfg.model.backbone.img_size = 64
    if 64 % cfg.model.backbone.deform_num_heads:  # BEiT-B's 12 deformable heads do not divide 64 channels: 4 (as
        cfg.model.backbone.deform_num_heads = cfg.model.backbone.arch['num_heads']  # the narrowed ViT's heads)
    cfg.model.backbone.init_cfg = None
    cfg.model.backbone.norm_cfg = dict(type='BN', requires_grad=True)
    cfg.model.data_preprocessor.size = (64, 64)
    for sub in ('decode_head', 'auxiliary_head'):  # one process: BN for SyncBN (as tools/train.py does)
        if cfg.model.get(sub) and 'norm_cfg' in cfg.model[sub]:
            cfg.model[sub].norm_cfg = dict(type='BN', requires_grad=True)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    groups, _ = RECIPES[name]['backbone.interaction_indexes']
    depth = groups[-1][-1] + 1  # the pinned interactions cover the blocks 0 .. depth - 1
    assert model.backbone.num_layers == depth and len(model.backbone.interactions) == len(groups)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    scales = {g['lr'] / cfg.optim_wrapper.optimizer.lr for g in wrapper.optimizer.param_groups}
    rate, _ = RECIPES[name]['layer_decay']  # the embeddings at layer 0 of depth + 2 layers; the adapter and heads x1
    assert min(scales) == pytest.approx(rate ** (depth + 1)) and max(scales) == pytest.approx(1.0)
    samples = []
    for _ in range(2):
        s = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, 150, (1, 64, 64)))
        samples.append(s)
    data = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8) for _ in range(2)],
                data_samples=samples)
    before = model.backbone.interactions[0].injector.attn.value_proj.weight.detach().clone()
    losses = model.train_step(data, wrapper)
    assert all(torch.isfinite(v).all() for v in losses.values())
    assert not torch.equal(before, model.backbone.interactions[0].injector.attn.value_proj.weight)


# The #Param column of ViT-Adapter's segmentation/README.md for the same model (BEiT-B adapter + Mask2Former head at
# C's 512, on COCO-Stuff-10k: 171 classes add 21 x 257 weights to ADE20K's 150, below the rounding).
PUBLISHED_PARAMS = {M2F_B: (120, 'segmentation/README.md:81')}


@pytest.mark.parametrize('name', sorted(PUBLISHED_PARAMS))
def test_full_size_model_has_the_published_parameter_count(name):
    import mmdet.models  # noqa: F401  (the Mask2Former head's parts)
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = Config.fromfile(os.path.join(CFG, name))
    cfg.model.backbone.init_cfg = None
    cfg.model.backbone.img_size = 512  # C:15, the counted model's (BEiT's relative position tables grow with it)
    torch.manual_seed(0)
    count = sum(p.numel() for p in MODELS.build(cfg.model).parameters())
    millions, source = PUBLISHED_PARAMS[name]
    assert round(count / 1e6) == millions, f'{name}: {count / 1e6:.1f}M parameters, ViT-Adapter {source}: {millions}M'
