"""The full-size EoMT ADE20K panoptic config against reference_recipes.py ``RECIPES_EOMT_ADE20K_PANOPTIC``
(tue-mps/eomt@7bd19dd path:line), and one narrowed training step on the ADE20K panoptic demo with a validation."""
import glob
import os

import pytest
import torch
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from beit_mm.converters.eomt import drop_class_head
from beit_mm.data.datasets.ade20k_panoptic import OFFICIAL_ORDER
from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
from beit_mm.registry import MODELS

from ..conftest import ROOT
from .reference_recipes import PUBLISHED_EOMT_ADE20K_PANOPTIC, RECIPES_EOMT_ADE20K_PANOPTIC
from .test_eomt_coco_configs import COCO_READERS, load, narrowed

CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*ade20k-panoptic*.py')))
READERS = dict(COCO_READERS,
               # the official lists ADE20K indices; the config's labels are mmdet's (things first): mapped back
               stuff_classes=lambda c: sorted(OFFICIAL_ORDER[label]
                                              for label in range(c.model.num_things_classes, c.model.num_classes)))
PAIRS = [(config, key) for config in sorted(RECIPES_EOMT_ADE20K_PANOPTIC)
         for key in sorted(RECIPES_EOMT_ADE20K_PANOPTIC[config])]


def test_every_ade20k_panoptic_config_is_pinned():
    assert sorted(os.path.relpath(p, os.path.join(ROOT, 'configs')) for p in CONFIGS) == \
        sorted(RECIPES_EOMT_ADE20K_PANOPTIC) == sorted(PUBLISHED_EOMT_ADE20K_PANOPTIC)


@pytest.mark.parametrize('config,key', PAIRS, ids=[k for _, k in PAIRS])
def test_config_has_the_official_value(config, key):
    want = RECIPES_EOMT_ADE20K_PANOPTIC[config][key]
    got = READERS[key](load(config))
    assert got == want.value, f'{os.path.basename(config)}: {key} = {got!r}, official {want.source}: {want.value!r}'


@pytest.mark.parametrize('config', sorted(RECIPES_EOMT_ADE20K_PANOPTIC))
def test_data_start_and_schedule_structure(config):
    """The ADE20K panoptic dataset and its annotations, the start from the COCO panoptic EoMT without its class head
    (official README.md:136-144), and the schedule's end at the run's end."""
    cfg = load(config)
    assert cfg.model.task == 'panoptic' and cfg.model.num_things_classes == 100
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        assert loader.dataset.type == 'beit_mm.ADE20KPanopticDataset'
        assert loader.dataset.data_root == 'data/ade/ADEChallengeData2016/'
    assert cfg.train_dataloader.dataset.pipeline[1]['type'] == 'beit_mm.LoadADE20KPanopticAnnotations'
    pack = cfg.test_dataloader.dataset.pipeline[-1]
    assert {'seg_map_path', 'instance_map_path'} <= set(pack['meta_keys'])
    assert cfg.val_evaluator.type == 'beit_mm.PanopticQualityMetric'
    assert cfg.load_from == 'checkpoints/eomt-large-640_coco-panoptic_no-class-head.pth'
    assert cfg.model.backbone.init_cfg is None  # load_from holds the backbone: no DINOv2 file is read
    assert cfg.param_scheduler[0].end == cfg.train_cfg.max_iters
    assert cfg.model.mask_annealing.end_steps[-1] < cfg.train_cfg.max_iters


@pytest.fixture(scope='module')
def ade_root(tmp_path_factory) -> str:
    return make_demo_ade20k_panoptic(str(tmp_path_factory.mktemp('ade') / 'demo'), 2, 1, 64, seed=0)


@pytest.mark.parametrize('config', sorted(RECIPES_EOMT_ADE20K_PANOPTIC))
def test_full_size_config_trains_one_narrowed_step(config, ade_root, tmp_path):
    """The config at its own depth narrowed to 64 channels and 64 px, from a load_from without the class head: one
    training step and a validation through MMEngine's Runner."""
    cfg = narrowed(load(config), ade_root, tmp_path)
    start = str(tmp_path / 'coco-panoptic_no-class-head.pth')  # a COCO panoptic EoMT (133 classes), head dropped
    coco = cfg.copy()
    coco.model.update(num_classes=133, num_things_classes=80)
    init_default_scope('mmseg')
    torch.save({'state_dict': drop_class_head(MODELS.build(coco.model).state_dict())}, start)
    cfg.load_from = start
    runner = Runner.from_cfg(cfg)
    runner.train()
    log = open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')).read()
    assert 'Iter(train) [1/1]' in log and 'coco_panoptic/PQ' in log, log[-3000:]


def test_model_index_holds_the_published_number():
    import yaml
    with open(os.path.join(ROOT, 'configs', 'eomt', 'metafile.yml')) as f:
        entries = {m['Config']: m for m in yaml.safe_load(f)['Models']}
    for config, want in PUBLISHED_EOMT_ADE20K_PANOPTIC.items():
        (result, ) = entries['configs/' + config]['Results']
        assert result['Dataset'] == 'ADE20K' and result['Metrics'] == {'PQ': want.value}, \
            f'{config}: {result}, published {want.source}'
