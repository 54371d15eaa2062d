"""The PMT configs against tue-mps/pmt@54d73c9's yamls and defaults (``RECIPES``, path:line), the published numbers
of its model zoo in configs/pmt/metafile.yml, and its learning-rate schedule.

Each key's meaning is its reader in ``READERS``; the values come from the reference, never from the config under test.
Epoch lengths are the EoMT-DINOv3 siblings' (the same datasets and batch of 16, pinned by their own tests)."""
import math
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from ..conftest import ROOT

PMT = 'tue-mps/pmt@54d73c9'
Y = 'image/configs/'
ZOO = 'model_zoo/image/dinov3.md'


def src(path: str, line) -> str:
    return f'{PMT} {path}:{line}'


def _common(yaml: str) -> dict:
    """What every PMT yaml and the training defaults it runs with say (line numbers as in pmt_l_640.yaml)."""
    return {
        'type': ('beit_mm.PMT', src('image/models/pmt.py', 13)),
        'num_blocks': (6, src(yaml, 22)),
        'mlp_ratio': (1.0, src(yaml, 24) + ' hidden_dim = the width; ' + src('image/models/pmd.py', 77)),
        'layer_scale_init_value': (1.0, src('image/models/layers.py', 233)),
        'norm': ('SyncBN', src('image/models/pmt.py', 45)),
        'lr': (2e-4, src(yaml, 15)),
        'min_lr': (1e-9, src(yaml, 16)),
        'warmup_iters': (6000, src(yaml, 17)),
        'weight_decay': (0.05, src('image/training/mask_classification_panoptic.py', 29)),
        'optimizer': ('AdamW', src('image/training/lightning_module.py', 140)),
        'clip_grad': (0.01, src('image/main.py', 168)),
        'amp': (True, src('image/main.py', 161) + ' 16-mixed'),
        'batch_size': (16, src('image/datasets/coco_panoptic.py', 158)),
        'poly_power': (0.9, src('image/training/mask_classification_panoptic.py', 33)),
    }


COCO_STEPS = ([0, 23651, 32520, 41389, 50258, 59128], [3000, 38433, 47302, 56171, 65040, 73910])
ADE_STEPS = ([0, 5384, 7403, 9422, 11442, 13461], [3000, 8749, 10769, 12788, 14807, 16826])


def _recipe(yaml: str, arch: str, features: tuple, queries: int, classes: int, size: int, epochs: int,
            steps: tuple, sibling: str, size_line) -> dict:
    recipe = _common(yaml)
    recipe.update({
        'arch': (arch, src(yaml, 28)),
        'feature_indices': (features, src(yaml, 23 if 'ade20k' not in yaml else 24)),
        'num_queries': (queries, src(yaml, 21)),
        'num_classes': (classes, src(yaml, 34)),
        'img_size': (size, src(*size_line)),
        'max_iters': (epochs * Config.fromfile(osp.join(ROOT, 'configs', 'eomt', sibling)).iters_per_epoch,
                      src(yaml, 2) + f' max_epochs {epochs} x the epoch of {sibling}'),
        'mask_annealing': (steps, src(yaml, '13-14')),
    })
    return recipe


EOMT_PAN = 'eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-640x640.py'
EOMT_INS = 'eomt_dinov3-large-p16_4xb4-amp-12e_coco-instance-640x640.py'
EOMT_ADE = 'eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py'
L, SB = (5, 11, 17, 23), (2, 5, 8, 11)
RECIPES = {
    'pmt_dinov3-small-p16_1xb16-amp-12e_coco-panoptic-640x640.py': _recipe(
        Y + 'coco/panoptic/pmt_s_640.yaml', 'small', SB, 200, 133, 640, 12, COCO_STEPS, EOMT_PAN,
        ('image/datasets/coco_panoptic.py', 159)),
    'pmt_dinov3-base-p16_1xb16-amp-12e_coco-panoptic-640x640.py': _recipe(
        Y + 'coco/panoptic/pmt_b_640.yaml', 'base', SB, 200, 133, 640, 12, COCO_STEPS, EOMT_PAN,
        ('image/datasets/coco_panoptic.py', 159)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py': _recipe(
        Y + 'coco/panoptic/pmt_l_640.yaml', 'large', L, 200, 133, 640, 12, COCO_STEPS, EOMT_PAN,
        ('image/datasets/coco_panoptic.py', 159)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-1280x1280.py': _recipe(
        Y + 'coco/panoptic/pmt_l_1280.yaml', 'large', L, 200, 133, 1280, 12, COCO_STEPS, EOMT_PAN,
        (Y + 'coco/panoptic/pmt_l_1280.yaml', 35)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-instance-640x640.py': _recipe(
        Y + 'coco/instance/pmt_l_640.yaml', 'large', L, 200, 80, 640, 12, COCO_STEPS, EOMT_INS,
        ('image/datasets/coco_instance.py', 111)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-instance-1280x1280.py': _recipe(
        Y + 'coco/instance/pmt_l_1280.yaml', 'large', L, 200, 80, 1280, 12, COCO_STEPS, EOMT_INS,
        (Y + 'coco/instance/pmt_l_1280.yaml', 35)),
    'pmt_dinov3-large-p16_1xb16-amp-16e_ade20k-512x512.py': _recipe(
        Y + 'ade20k/semantic/pmt_l_512.yaml', 'large', L, 100, 150, 512, 16, ADE_STEPS, EOMT_ADE,
        (Y + 'ade20k/semantic/pmt_l_512.yaml', 35)),
}
PUBLISHED = {  # model_zoo/image/dinov3.md: the table rows' metric cells
    'pmt_dinov3-small-p16_1xb16-amp-12e_coco-panoptic-640x640.py': ('PQ', 45.3, src(ZOO, 22)),
    'pmt_dinov3-base-p16_1xb16-amp-12e_coco-panoptic-640x640.py': ('PQ', 52.8, src(ZOO, 29)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py': ('PQ', 56.1, src(ZOO, 36)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-1280x1280.py': ('PQ', 58.1, src(ZOO, 43)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-instance-640x640.py': ('mask AP', 45.4, src(ZOO, 65)),
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-instance-1280x1280.py': ('mask AP', 49.0, src(ZOO, 72)),
    'pmt_dinov3-large-p16_1xb16-amp-16e_ade20k-512x512.py': ('mIoU', 58.5, src(ZOO, 94)),
}


def _scheduler(cfg, kind: str) -> dict:
    (found, ) = [s for s in cfg.param_scheduler if s['type'] == kind]
    return found


READERS = {
    'type': lambda cfg: cfg.model.type,
    'num_blocks': lambda cfg: cfg.model.num_blocks,
    'mlp_ratio': lambda cfg: cfg.model.mlp_ratio,
    'layer_scale_init_value': lambda cfg: cfg.model.layer_scale_init_value,
    'norm': lambda cfg: cfg.model.norm_cfg['type'],
    'lr': lambda cfg: cfg.optim_wrapper.optimizer.lr,
    'min_lr': lambda cfg: _scheduler(cfg, 'CosineAnnealingLR')['eta_min'],
    'warmup_iters': lambda cfg: _scheduler(cfg, 'LinearLR')['end'] - 1,
    'weight_decay': lambda cfg: cfg.optim_wrapper.optimizer.weight_decay,
    'optimizer': lambda cfg: cfg.optim_wrapper.optimizer.type,
    'clip_grad': lambda cfg: cfg.optim_wrapper.clip_grad.max_norm,
    'amp': lambda cfg: cfg.optim_wrapper.type == 'beit_mm.AmpOptimWrapper',
    'batch_size': lambda cfg: cfg.train_dataloader.batch_size,
    'poly_power': lambda cfg: cfg.model.mask_annealing.get('poly_power', 0.9),
    'arch': lambda cfg: cfg.model.backbone.arch,
    'feature_indices': lambda cfg: tuple(cfg.model.feature_indices),
    'num_queries': lambda cfg: cfg.model.num_queries,
    'num_classes': lambda cfg: cfg.model.num_classes,
    'img_size': lambda cfg: cfg.model.backbone.img_size,
    'max_iters': lambda cfg: cfg.train_cfg.max_iters,
    'mask_annealing': lambda cfg: (list(cfg.model.mask_annealing.start_steps), list(cfg.model.mask_annealing.end_steps)),
}
PAIRS = [(config, key) for config in sorted(RECIPES) for key in sorted(RECIPES[config])]


def load(config: str) -> Config:
    return Config.fromfile(osp.join(ROOT, 'configs', 'pmt', config))


def test_every_pmt_config_is_pinned():
    found = sorted(f for f in os.listdir(osp.join(ROOT, 'configs', 'pmt')) if f.endswith('.py'))
    assert found == sorted(RECIPES) == sorted(PUBLISHED)


@pytest.mark.parametrize('config,key', PAIRS, ids=[f'{c[4:-3]}:{k}' for c, k in PAIRS])
def test_config_has_the_official_value(config, key):
    want, source = RECIPES[config][key]
    got = READERS[key](load(config))
    assert got == want, f'{config}: {key} = {got!r}, official {source}: {want!r}'


def test_metafile_lists_the_published_numbers():
    from mmengine.fileio import load as load_file
    meta = load_file(osp.join(ROOT, 'configs', 'pmt', 'metafile.yml'))
    by_config = {osp.basename(m['Config']): m for m in meta['Models']}
    assert sorted(by_config) == sorted(PUBLISHED)
    for config, (metric, value, source) in PUBLISHED.items():
        (result, ) = by_config[config]['Results']
        assert result['Metrics'] == {metric: value}, f'{config}: {result["Metrics"]}, published {source}: {value}'


def _reference_lr(step: int, total: int, base: float = 2e-4, warmup: int = 6000, min_lr: float = 1e-9) -> float:
    """tue-mps/pmt image/training/warmup_cosine_schedule.py:27-36, the lr at optimizer step ``step``."""
    if step < warmup:
        return base * step / warmup
    return min_lr + 0.5 * (base - min_lr) * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


@pytest.mark.parametrize('config', ['pmt_dinov3-large-p16_1xb16-amp-16e_ade20k-512x512.py'])
def test_schedule_follows_the_official_warmup_cosine(config):
    """The configs' MMEngine schedulers stepped over a whole ADE20K run (20,208 steps) give the official lr at every
    step within 1e-12 absolute (the warm-up starts at 1e-9 x lr instead of 0)."""
    from mmengine.optim import OptimWrapper
    from mmengine.registry import PARAM_SCHEDULERS
    cfg = load(config)
    total = cfg.train_cfg.max_iters
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=cfg.optim_wrapper.optimizer.lr)
    wrapper = OptimWrapper(optimizer)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=wrapper)) for s in cfg.param_scheduler]
    worst = 0.0
    for step in range(total):
        worst = max(worst, abs(optimizer.param_groups[0]['lr'] - _reference_lr(step, total)))
        for scheduler in schedulers:
            scheduler.step()
    assert worst <= 1e-12, f'max |lr - official| {worst:.3g} over {total} steps'
