"""The EoMT-DINOv3 configs against reference_recipes.py ``RECIPES_EOMT_DINOV3`` (tue-mps/eomt@7bd19dd path:line) and
the model index; each differs from its DINOv2 sibling only where the official yamls do; one trains a narrowed step."""
import glob
import os

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.models.backbones.dinov3 import ARCHS

from ..conftest import ROOT
from .reference_recipes import DINOV3_HF_NAMES, PUBLISHED_EOMT_DINOV3, RECIPES_EOMT_DINOV3
from .test_eomt_coco_configs import COCO_READERS
from .test_model_index import BY_NAME

CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*dinov3*.py')))


def load(name: str) -> Config:
    return Config.fromfile(os.path.join(ROOT, 'configs', name))


def _ade_size(cfg):
    """ADE20K semantic: the backbone's size, the crop, the padding and the test window, or all of them if they
    differ."""
    crop = {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}['RandomCrop']['crop_size']
    sizes = {cfg.model.backbone.img_size, *crop, *cfg.model.data_preprocessor.size, *cfg.model.test_cfg.crop_size}
    return sizes.pop() if len(sizes) == 1 else sorted(sizes)


def _backbone(cfg) -> str:
    """The transformers model the official yaml names for this backbone (its arch's HF name), when it is a DINOv3
    with the released ViTs' settings."""
    b = cfg.model.backbone
    released = dict(patch_size=16, num_register_tokens=4, layer_scale_init_value=1e-5, rope_rescale_coords=2.0,
                    drop_path_rate=0.0, final_norm=True)
    if b.type != 'beit_mm.DINOv3' or any(b.get(k) != v for k, v in released.items()):
        return f'not a released DINOv3: {b}'
    return DINOV3_HF_NAMES.get(b.arch, b.arch)


READERS = {**COCO_READERS, 'backbone': _backbone}


def read(config: str, key: str):
    cfg = load(config)
    if key == 'img_size' and 'ade20k' in config:
        return _ade_size(cfg)
    return READERS[key](cfg)


PAIRS = [(config, key) for config in sorted(RECIPES_EOMT_DINOV3) for key in sorted(RECIPES_EOMT_DINOV3[config])]


def test_every_dinov3_config_is_pinned_with_its_published_number():
    assert sorted(os.path.relpath(p, os.path.join(ROOT, 'configs')) for p in CONFIGS) == sorted(RECIPES_EOMT_DINOV3)
    assert set(PUBLISHED_EOMT_DINOV3) == set(RECIPES_EOMT_DINOV3)
    for config, published in PUBLISHED_EOMT_DINOV3.items():
        (result, ) = BY_NAME[os.path.splitext(os.path.basename(config))[0]]['Results']
        assert list(result['Metrics'].values()) == [published.value], (config, published.source)


@pytest.mark.parametrize('config,key', PAIRS, ids=[f'{os.path.basename(c)[5:-3]}:{k}' for c, k in PAIRS])
def test_config_has_the_official_value(config, key):
    want = RECIPES_EOMT_DINOV3[config][key]
    got = read(config, key)
    assert got == want.value, f'{os.path.basename(config)}: {key} = {got!r}, official {want.source}: {want.value!r}'


def sibling(config: str) -> str:
    """The DINOv2 config a DINOv3 one inherits from, directly or through its DINOv3 sibling at 640."""
    cfg_file = os.path.join(ROOT, 'configs', config)
    while True:
        base = Config._get_base_files(cfg_file)[0]  # noqa: SLF001  (mmengine's own reader; the backbone's 2nd)
        cfg_file = os.path.normpath(os.path.join(os.path.dirname(cfg_file), base))
        if 'dinov2' in cfg_file:
            return os.path.relpath(cfg_file, os.path.join(ROOT, 'configs'))


# what the DINOv3 yamls change against the DINOv2 ones of their task (reference_recipes.py RECIPES_EOMT_DINOV3 keys):
# the model's backbone, start and annealing (and L2 for S/B), the lr, the layer decay, the warmup and the length
CHANGED = {('model', 'backbone'), ('model', 'mask_annealing'), ('model', 'num_blocks'), ('pretrained', ),
           ('optim_wrapper', 'optimizer', 'lr'), ('optim_wrapper', 'paramwise_cfg'), ('param_scheduler', ),
           ('train_cfg', 'max_iters'), ('max_iters', ), ('base_lr', ), ('eomt_dinov3_large', )}


def _flatten(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _flatten(value, path + (key, ))
    else:
        yield path, node


@pytest.mark.parametrize('config', sorted(RECIPES_EOMT_DINOV3))
def test_config_changes_its_dinov2_sibling_only_where_the_recipes_differ(config):
    """Everything else (data, pipelines, loss, post-processing, hooks, precision, evaluation) is the DINOv2 sibling's,
    where resolution sets values at its own size."""
    ours, base = dict(_flatten(load(config).to_dict())), dict(_flatten(load(sibling(config)).to_dict()))
    if '1280' in config and '1280' not in sibling(config):  # sizes set by the 1280 configs themselves
        base = dict(_flatten(load(sibling(config).replace('640x640', '1280x1280')).to_dict()))
    differ = {k for k in set(ours) | set(base) if ours.get(k, '<absent>') != base.get(k, '<absent>')}
    unexplained = sorted(k for k in differ if not any(k[:len(c)] == c for c in CHANGED))
    assert not unexplained, f'{config} differs from {sibling(config)} at {unexplained[:6]}'


def test_a_narrowed_dinov3_eomt_trains_a_step():
    """The COCO panoptic ViT-S config's model at its own depth, narrowed: a loss whose backward reaches the first block,
    and the EoMT layer-decay groups (llrd 0.8, the last 3 blocks at the full lr)."""
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData, PixelData
    from mmdet.structures.mask import BitmapMasks
    from beit_mm.registry import OPTIM_WRAPPER_CONSTRUCTORS
    cfg = load('eomt/eomt_dinov3-small-p16_4xb4-amp-24e_coco-panoptic-640x640.py')
    assert ARCHS[cfg.model.backbone.arch]['num_layers'] == 12
    cfg.model.backbone.update(arch=dict(ARCHS['small'], embed_dims=64, num_heads=4), img_size=64, init_cfg=None)
    cfg.model.loss.num_points = 64
    cfg.model.pop('data_preprocessor')
    model = build_from_config(cfg).train()
    model.set_annealing_step(0)
    x = torch.randn(1, 3, 64, 64)
    masks = torch.zeros(2, 64, 64, dtype=torch.bool)
    masks[0, :32], masks[1, 32:] = True, True
    sample = DetDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), batch_input_shape=(64, 64)))
    sample.gt_instances = InstanceData(masks=BitmapMasks(masks.numpy(), 64, 64), labels=torch.tensor([3, 90]))
    sample.gt_sem_seg = PixelData(sem_seg=torch.where(masks[0], 3, 90)[None])
    losses = model.loss(x, [sample])
    sum(losses.values()).backward()
    assert model.backbone.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    ctor = OPTIM_WRAPPER_CONSTRUCTORS.build(dict(type='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
                                                 optim_wrapper_cfg=dict(type='OptimWrapper',
                                                                        optimizer=cfg.optim_wrapper.optimizer),
                                                 paramwise_cfg=cfg.optim_wrapper.paramwise_cfg))
    groups = ctor(model).optimizer.param_groups
    lr_of = {name: g['lr'] for g in groups for name in g['param_names']}
    assert lr_of['backbone.blocks.9.attn.qkv.weight'] == pytest.approx(2e-4)  # an L2 block: full lr
    assert lr_of['backbone.blocks.8.attn.qkv.weight'] == pytest.approx(2e-4 * 0.8 ** 3)  # llrd ** (L - 1 - b)
    assert lr_of['backbone.cls_token'] == pytest.approx(2e-4 * 0.8 ** 11)
