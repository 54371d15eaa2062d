"""The full-size EoMT COCO panoptic and instance configs against the official recipes, reference_recipes.py
``RECIPES_EOMT_COCO`` (tue-mps/eomt@7bd19dd path:line), and one narrowed training step of each task on the COCO-layout
demo followed by a validation; the BEiT-L and BEiT v2-L COCO configs hold the same recipe with the backbone swapped."""
import glob
import json
import os
import shlex

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.data.demo.coco import make_demo_coco
from beit_mm.engine.hooks.compile import use_compile_hook
from beit_mm.models.backbones.beit import ARCHS

from ..conftest import ROOT, narrow_beit
from .reference_recipes import IMAGENET_MEAN, IMAGENET_STD, PUBLISHED_EOMT_COCO, RECIPES_EOMT_COCO
from .test_model_index import load_index
from .test_recipes import READERS

CONFIGS = sorted(set(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*coco*.py')))
                 - set(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*dinov3*.py'))))  # test_eomt_dinov3_configs.py

# ---- the BEiT-L / BEiT v2-L COCO configs: the official recipe of their task at 640, the backbone swapped -------------
# the unilm pretrained-only checkpoint each starts from: "self-supervised pretrained on ImageNet-22k", BEiT-large
# (microsoft/unilm@0253688a beit/README.md:26-28); "self-supervised pretrained on ImageNet-1k", BEiT-large
# (microsoft/unilm@152193af beit2/README.md:17-19)
UNILM_BEIT_L, UNILM_BEITV2_L = 'beit_large_patch16_224_pt22k.pth', 'beitv2_large_patch16_224_pt1k.pth'
BEIT_COCO = {  # config -> (task, the unilm file)
    f'eomt/eomt_{name}-large_4xb4-amp-12e_coco-{task}-640x640.py': (task, unilm)
    for name, unilm in (('beit', UNILM_BEIT_L), ('beitv2', UNILM_BEITV2_L)) for task in ('panoptic', 'instance')
}
# BEiT-large (unilm beit/README.md:20, beit2/README.md:11): #layer=24; hidden=1024; #head=16; patch=16x16
BEIT_L = dict(embed_dims=1024, num_layers=24, num_heads=16, patch_size=16)
# keys of RECIPES_EOMT_COCO that depend on the backbone; none for BEiT-L: num_blocks (L2 = 4) is the ViT-L default
# (models/eomt.py:24), BEiT-L has ViT-L's 24 blocks, 640 is a multiple of patch 16; the rest are the task's
BACKBONE_DEPENDENT: dict = {}


def official_of(config: str) -> str:
    """The RECIPES_EOMT_COCO key (the official DINOv2 config) of a BEiT COCO config's task at 640."""
    (key, ) = [k for k in RECIPES_EOMT_COCO if k.endswith(f'coco-{BEIT_COCO[config][0]}-640x640.py')]
    return key


def load(name: str) -> Config:
    return Config.fromfile(os.path.join(ROOT, 'configs', name))


def _train(cfg, name):
    return {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}[name]


def _one_size(cfg):
    """The size every part uses (the ViT's position grid, the padding, the jitter target, the crop and the test
    resize), or all the sizes found when they differ."""
    test = {t['type']: t for t in cfg.test_dataloader.dataset.pipeline}['mmdet.Resize']
    sizes = {cfg.model.backbone.img_size, cfg.model.data_preprocessor.pad_size_divisor,
             *_train(cfg, 'mmdet.RandomResize').scale, *_train(cfg, 'mmdet.RandomCrop').crop_size, *test.scale}
    return sizes.pop() if len(sizes) == 1 else sorted(sizes)


def _steps_per_epoch(cfg) -> int:
    """The config's epoch in iterations (its ``iters_per_epoch``, which the schedule, validation and checkpoint
    intervals are written in)."""
    return cfg.iters_per_epoch


# what each key of RECIPES_EOMT_COCO means, read from a config
COCO_READERS = {
    'max_epochs': lambda c: c.train_cfg.max_iters / _steps_per_epoch(c),
    'steps_per_epoch': lambda c: _steps_per_epoch(c),
    'val_every_epochs': lambda c: c.train_cfg.val_interval / _steps_per_epoch(c),
    'anneal_start': lambda c: c.model.mask_annealing.start_steps,
    'anneal_end': lambda c: c.model.mask_annealing.end_steps,
    'num_queries': lambda c: c.model.num_queries,
    'num_blocks': lambda c: c.model.num_blocks,
    'img_size': lambda c: _one_size(c),
    'num_classes': lambda c: c.model.num_classes,
    'stuff_classes': lambda c: list(range(c.model.num_things_classes, c.model.num_classes)),
    'scale_range': lambda c: tuple(_train(c, 'mmdet.RandomResize').ratio_range)
    if _train(c, 'mmdet.RandomResize').keep_ratio else None,
    'color_jitter': lambda c: any('Photo' in t['type'] or 'ColorJitter' in t['type']
                                  for t in c.train_dataloader.dataset.pipeline),
    'flip': lambda c: _train(c, 'mmdet.RandomFlip').prob,
    'drop_last': lambda c: c.train_dataloader.get('drop_last', True) and
    c.train_dataloader.sampler.type == 'InfiniteSampler',  # an iteration-based run draws full batches only
    'lr': lambda c: c.optim_wrapper.optimizer.lr,
    'llrd': lambda c: c.optim_wrapper.paramwise_cfg.layer_decay_rate,
    'llrd_l2_enabled': lambda c: c.optim_wrapper.paramwise_cfg.llrd_l2_enabled,
    'weight_decay': lambda c: c.optim_wrapper.optimizer.weight_decay,
    'points': lambda c: (c.model.loss.num_points, c.model.loss.oversample_ratio, c.model.loss.importance_sample_ratio),
    'poly_power': lambda c: {c.model.mask_annealing.poly_power, c.param_scheduler[0].poly_power}.pop()
    if c.model.mask_annealing.poly_power == c.param_scheduler[0].poly_power else 'mixed',
    'warmup_steps': lambda c: tuple(c.param_scheduler[0].warmup_steps),
    'loss_weights': lambda c: (c.model.loss.no_object_weight, c.model.loss.mask_weight, c.model.loss.dice_weight,
                               c.model.loss.class_weight),
    'mask_thresh': lambda c: c.model.mask_thresh,
    'overlap_thresh': lambda c: c.model.overlap_thresh,
    'top_k_instances': lambda c: c.model.top_k_instances,
    'grad_clip': lambda c: c.optim_wrapper.clip_grad.max_norm if c.optim_wrapper.clip_grad.norm_type == 2 else None,
    'seed': lambda c: c.randomness.seed,
    'total_batch': lambda c: 4 * c.train_dataloader.batch_size * c.optim_wrapper.get('accumulative_counts', 1),
    **{key: READERS[key] for key in ('precision.amp', 'precision.dtype', 'precision.loss_scale')},
}
PAIRS = [(config, key) for config in sorted(RECIPES_EOMT_COCO) for key in sorted(RECIPES_EOMT_COCO[config])]


def test_every_coco_config_is_pinned():
    assert sorted(os.path.relpath(p, os.path.join(ROOT, 'configs')) for p in CONFIGS) == sorted(
        [*RECIPES_EOMT_COCO, *BEIT_COCO])
    assert set(PUBLISHED_EOMT_COCO) == set(RECIPES_EOMT_COCO)


@pytest.mark.parametrize('config,key', PAIRS, ids=[f'{os.path.basename(c)[-30:]}:{k}' for c, k in PAIRS])
def test_config_has_the_official_value(config, key):
    want = RECIPES_EOMT_COCO[config][key]
    got = COCO_READERS[key](load(config))
    assert got == want.value, f'{os.path.basename(config)}: {key} = {got!r}, official {want.source}: {want.value!r}'


@pytest.mark.parametrize('config', sorted(BEIT_COCO))
def test_beit_config_has_the_official_recipe_of_its_task(config):
    """Every RECIPES_EOMT_COCO value of the official config of the task at 640 (none of them backbone-dependent:
    ``BACKBONE_DEPENDENT``) holds for the BEiT config."""
    cfg, official = load(config), RECIPES_EOMT_COCO[official_of(config)]
    keys = sorted(set(official) - set(BACKBONE_DEPENDENT))
    assert len(keys) >= 30
    wrong = [f'{key} = {COCO_READERS[key](cfg)!r}, official {official[key].source}: {official[key].value!r}'
             for key in keys if COCO_READERS[key](cfg) != official[key].value]
    assert not wrong, f'{os.path.basename(config)}: ' + '; '.join(wrong)


@pytest.mark.parametrize('config', sorted(BEIT_COCO))
def test_beit_config_backbone_and_its_start(config):
    """BEiT-L as the ADE20K semantic BEiT-L EoMT builds it (relative position bias per block, layer scale, no absolute
    position embedding or registers, no drop path, the final norm), ImageNet mean/std and the EoMT layer-decay rule as
    the semantic BEiT EoMT configs; its start the unilm pretrained-only file, converted by the command of its model
    index entry and of its header to the path it loads (the same path every entry converts that file to)."""
    cfg = load(config)
    b = cfg.model.backbone
    assert b.type == 'beit_mm.BEiT' and {k: ARCHS[b.arch][k] for k in ('embed_dims', 'num_layers', 'num_heads')} == {
        k: BEIT_L[k] for k in ('embed_dims', 'num_layers', 'num_heads')}
    assert b.patch_size == BEIT_L['patch_size'] and b.img_size == RECIPES_EOMT_COCO[official_of(config)][
        'img_size'].value
    assert b.use_rel_pos_bias is True and b.use_shared_rel_pos_bias is False and b.use_abs_pos_emb is False
    assert not b.get('num_register_tokens') and not b.get('no_embed_class')
    assert b.layer_scale_init_value > 0 and b.drop_path_rate == 0.0 and b.final_norm is True
    pre = cfg.model.data_preprocessor
    assert (list(pre.mean), list(pre.std)) == (IMAGENET_MEAN, IMAGENET_STD)
    assert cfg.optim_wrapper.constructor == 'beit_mm.EoMTLayerDecayOptimWrapperConstructor'

    unilm = BEIT_COCO[config][1]
    assert b.init_cfg == dict(type='Pretrained', checkpoint=cfg.pretrained)
    models = load_index()[1]
    (entry, ) = [m for m in models if m['Config'] == 'configs/' + config]
    argv = shlex.split(entry['Converted From']['Command'])
    assert argv[:7] == ['python', 'tools/convert_checkpoint.py', '--model', 'beit', '--source', 'unilm', unilm], argv
    assert argv[7:] == [cfg.pretrained], f'{config}: the command writes {argv[7:]}, the config loads {cfg.pretrained}'
    with open(os.path.join(ROOT, 'configs', config)) as f:
        header = ' '.join(line.lstrip('#').strip().rstrip('\\').strip() for line in f if line.startswith('#'))
    assert ' '.join(argv) in ' '.join(header.split()), f'{config}: its header does not show the command {argv}'
    for m in models:  # one converted name for one unilm file across the model index
        other = shlex.split(m['Converted From']['Command'])
        if unilm in other and '--model' in other and other[other.index('--model') + 1] == 'beit':
            assert other[-1] == cfg.pretrained, (m['Name'], other[-1], cfg.pretrained)


@pytest.mark.parametrize('config', sorted([*RECIPES_EOMT_COCO, *BEIT_COCO]))
def test_task_data_and_schedule_structure(config):
    """The task, mmdet's dataset of the real COCO layout under data/coco, the metric of the published number, the
    schedule's end at the run's end and the annealing hook."""
    cfg = load(config)
    panoptic = 'panoptic' in config
    assert cfg.model.type == 'beit_mm.EoMT' and cfg.model.task == ('panoptic' if panoptic else 'instance')
    assert cfg.model.num_things_classes == (80 if panoptic else None)
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        assert loader.dataset.type == ('mmdet.CocoPanopticDataset' if panoptic else 'mmdet.CocoDataset')
        assert loader.dataset.data_root == 'data/coco/'
    # panoptic: stuff-only images train as in the official (datasets/dataset.py:135-139 drops single-value PNGs only;
    # mmdet's filter_empty_gt drops images without a thing); instance: images without an annotation are not listed
    # by the official (datasets/dataset.py:86-103, 125), mmdet's filter_empty_gt drops them
    assert cfg.train_dataloader.dataset.filter_cfg.filter_empty_gt is (not panoptic)
    assert cfg.val_evaluator.type == ('beit_mm.PanopticQualityMetric' if panoptic else 'beit_mm.DatasetCocoMetric')
    if not panoptic:
        assert cfg.val_evaluator.metric == 'segm'
    assert cfg.param_scheduler[0].end == cfg.train_cfg.max_iters
    assert 'beit_mm.EoMTMaskAnnealingHook' in [h['type'] for h in cfg.custom_hooks]
    assert cfg.model.mask_annealing.end_steps[-1] < cfg.train_cfg.max_iters


# COCO's category ids (the real annotation files): 80 things, then 53 stuff (panoptic); mmdet's class lists follow them
THING_IDS = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]
STUFF_IDS = [92, 93, 95, 100, 107, 109, 112, 118, 119, 122, 125, 128, 130, 133, 138, 141, 144, 145, 147, 148, 149, 151,
             154, 155, 156, 159, 161, 166, 168, 171, 175, 176, 177, 178, 180, 181, 184, 185, 186, 187, 188, 189, 190,
             191, 192, 193, 194, 195, 196, 197, 198, 199, 200]


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    """The generated COCO demo (2 train, 1 val image) listing every COCO category, as mmdet numbers labels by the
    categories a file lists."""
    from mmdet.datasets import CocoDataset, CocoPanopticDataset
    from beit_mm.fileio.json_file import read_json
    root = make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 2, 1, 64, seed=0)
    names = CocoPanopticDataset.METAINFO['classes']
    assert len(THING_IDS) == 80 and len(STUFF_IDS) == 53 and names[:80] == CocoDataset.METAINFO['classes']
    for kind, ids in (('instances', THING_IDS), ('panoptic', THING_IDS + STUFF_IDS)):
        for split in ('train', 'val'):
            path = os.path.join(root, 'annotations', f'{kind}_{split}2017.json')
            data = read_json(path)
            have = {c['id']: c for c in data['categories']}
            assert all(names[ids.index(i)] == c['name'] for i, c in have.items())  # the demo's ids are COCO's
            data['categories'] = [have.get(i, dict(id=i, name=names[n], supercategory='', isthing=int(n < 80)))
                                  for n, i in enumerate(ids)]
            with open(path, 'w') as f:
                json.dump(data, f)
    return root


def test_beitv2_configs_differ_from_the_beit_ones_only_in_the_start():
    """The BEiT v2-L configs are the BEiT-L ones but for the checkpoint, so the narrowed step of the BEiT-L config
    (random weights, no checkpoint) stands for theirs."""
    pairs = [(c, c.replace('eomt_beitv2-', 'eomt_beit-')) for c in sorted(BEIT_COCO) if 'beitv2' in c]
    assert len(pairs) == 2 and all(beit in BEIT_COCO for _, beit in pairs)
    for v2, beit in pairs:
        d2, d1 = load(v2).to_dict(), load(beit).to_dict()
        assert d2.pop('pretrained') != d1.pop('pretrained')
        assert d2['model']['backbone'].pop('init_cfg') != d1['model']['backbone'].pop('init_cfg')
        assert d2 == d1, v2


# one step per config of the official recipe, and per task for BEiT-L (BEiT v2-L: the same model, test above)
def narrowed(cfg, data_root: str, tmp_path, size: int = 64):
    """A full-size EoMT panoptic/instance config at its own depth narrowed to 64 channels and ``size`` px on the demo
    at ``data_root``: random weights, one training step, then a validation, no checkpoint written."""
    narrow_beit(cfg)
    cfg.model.backbone.img_size = size
    cfg.model.backbone.init_cfg = None  # random weights: no checkpoint offline
    cfg.model.data_preprocessor.pad_size_divisor = size
    cfg.model.loss.num_points = 256
    cfg.model.mask_annealing.update(start_steps=[1, 1, 1, 1], end_steps=[1, 1, 1, 1])
    for t in cfg.train_dataloader.dataset.pipeline:
        if t['type'] == 'mmdet.RandomResize':
            t['scale'] = (size, size)
        if t['type'] == 'mmdet.RandomCrop':
            t['crop_size'] = (size, size)
    for t in cfg.test_dataloader.dataset.pipeline:
        if t['type'] == 'mmdet.Resize':
            t['scale'] = (size, size)
    cfg.val_dataloader = cfg.test_dataloader
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = data_root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.update(max_iters=1, val_interval=1)
    cfg.param_scheduler[0].update(warmup_steps=(1, 0), end=1)
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 10  # no checkpoint written
    cfg.work_dir = str(tmp_path / 'work')
    cfg.visualizer.pop('name')  # the runner's own name (conftest._own_runner_names), not a shared 'visualizer'
    use_compile_hook(cfg)  # as tools/train.py: the config's compile setting (CUDA only) as a hook
    return cfg


@pytest.mark.parametrize('config', [c for c in sorted([*RECIPES_EOMT_COCO, *BEIT_COCO])
                                    if '640x640' in c and 'beitv2' not in c])
def test_full_size_config_trains_one_narrowed_step(config, coco_root, tmp_path, capsys):
    """The config at its own depth narrowed to 64 channels and 64 px: one training step and a validation through
    MMEngine's Runner (BEiT configs with their relative position tables at the 4x4 grid)."""
    cfg = narrowed(load(config), coco_root, tmp_path)
    runner = Runner.from_cfg(cfg)
    runner.train()
    if config in BEIT_COCO:  # a relative position bias table per block ((2 x 4 - 1)^2 + 3 rows: 64 px / 16), 4 heads
        tables = [blk.attn.relative_position_bias_table for blk in runner.model.backbone.blocks]
        assert len(tables) == BEIT_L['num_layers'] and {tuple(t.shape) for t in tables} == {(7 * 7 + 3, 4)}
    captured = capsys.readouterr()
    out = captured.out + captured.err
    log = open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')).read()
    assert 'Iter(train) [1/1]' in log, log[-3000:]
    if 'panoptic' in config:
        assert 'coco_panoptic/PQ' in log, log[-3000:]
    else:
        assert 'coco/segm_mAP' in log, (log + out)[-3000:]


def test_model_index_holds_the_published_numbers():
    """configs/eomt/metafile.yml's result of each COCO config is the model zoo's number (PUBLISHED_EOMT_COCO, read
    from tue-mps/eomt model_zoo/dinov2.md), its metric PQ (panoptic) or mask AP (instance)."""
    import yaml
    with open(os.path.join(ROOT, 'configs', 'eomt', 'metafile.yml')) as f:
        entries = {m['Config']: m for m in yaml.safe_load(f)['Models']}
    for config, want in PUBLISHED_EOMT_COCO.items():
        (result, ) = entries['configs/' + config]['Results']
        metric = 'PQ' if 'panoptic' in config else 'mask AP'
        assert result['Metrics'] == {metric: want.value}, f'{config}: {result["Metrics"]}, published {want.source}'
