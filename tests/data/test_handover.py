"""What a worker-side transform hands to the data preprocessor must reach it through the pack transform's
``meta_keys`` (``beit_mm.data.checks.handover``): checked when the run is built, and here over every config.

Without the check, the BEiT MIM demo on the draft pipeline with ``'color_jitter'`` left out of ``PackInputs``'
``meta_keys`` trained 2 iterations with exit 0, no warning, and no jitter (the packed samples carried none).
"""
from __future__ import annotations

import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from beit_mm.data.checks import HandoverError, check_handover, check_pipeline

from beit_mm.models.tokenizers import DALLEEncoder

from ..conftest import ROOT

DEMO = f'{ROOT}/configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'


def draft_demo(tmp_path, with_key: bool) -> tuple[Config, dict]:
    """The demo config and its cfg_options for a 2-iteration run on the draft pipeline (``'color_jitter'`` packed
    or not)."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    cfg = Config.fromfile(DEMO)
    pipeline = Config.fromfile(f'{ROOT}/configs/_base_/datasets/imagenet_mim.py').train_pipeline
    pipeline[1].update(size=cfg.img_size, tokenizer_size=cfg.img_size // 2, scale=(0.2, 1.0))
    pipeline[2] = cfg.train_pipeline[4]
    if not with_key:
        pipeline[3]['meta_keys'] = tuple(k for k in pipeline[3]['meta_keys'] if k != 'color_jitter')
    torch.save(DALLEEncoder(**cfg.tokenizer).state_dict(), tmp_path / 'tokenizer.pth')
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=1, size=128, seed=0)
    return cfg, {
        'model.target_generator.init_cfg.checkpoint': str(tmp_path / 'tokenizer.pth'),
        'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
        'train_dataloader.batch_size': 4, 'train_dataloader.dataset.pipeline': pipeline,
        'train_dataloader.dataset.data_root': root, 'train_cfg.max_iters': 2, 'default_hooks.logger.interval': 1,
        'default_hooks.checkpoint.interval': 2}


def test_draft_demo_without_the_jitter_key_fails_when_the_run_is_built(tmp_path):
    from beit_mm.apis.train import train
    _, options = draft_demo(tmp_path, with_key=False)
    with pytest.raises(HandoverError, match=r"SampleColorJitter hands 'color_jitter' .* PackInputs drops it.*Fix: add "
                                            r"'color_jitter' to PackInputs\(meta_keys=...\)"):
        train(DEMO, work_dir=str(tmp_path / 'work'), cfg_options=options)
    assert not list((tmp_path / 'work').rglob('*.pth'))


JITTER = dict(type='beit_mm.SampleColorJitter', brightness=0.4)
CROP = dict(type='beit_mm.EncodedRandomResizedCrop', scale=64)


@pytest.mark.parametrize('pipeline, match', [
    ([JITTER, dict(type='PackInputs', meta_keys=('img_path', ))], "'color_jitter'.*PackInputs drops it"),
    ([JITTER, dict(type='PackInputs')], "'color_jitter'.*its meta_keys \\('sample_idx'"),  # the default keys
    ([JITTER], "'color_jitter'.*no pack transform follows it"),
    ([CROP, dict(type='PackInputs', meta_keys=('flip', 'ori_shape', 'crop_resize'))], "'crop_bbox'"),
    ([dict(type='beit_mm.SamplePhotoMetricDistortion'), dict(type='PackSegInputs')], "'photometric_distortion'"),
    ([dict(type='RandomApply', transforms=[JITTER]), dict(type='PackInputs')], "'color_jitter'"),
])
def test_a_dropped_key_is_named_with_both_transforms(pipeline, match):
    scope = 'mmseg' if 'PackSegInputs' in str(pipeline) else 'mmpretrain'
    with pytest.raises(HandoverError, match=match):
        check_pipeline(pipeline, scope=scope)


def test_a_pack_transform_is_known_by_its_class():
    """A subclass of a pack transform, registered under a name of its own, is checked as its base class."""
    from mmengine.registry import TRANSFORMS as ROOT_TRANSFORMS
    from mmpretrain.datasets.transforms import PackInputs

    class PackForTest(PackInputs):
        pass

    pipeline = [JITTER, dict(type=PackForTest, meta_keys=('img_path', ))]
    with pytest.raises(HandoverError, match="'color_jitter'.*PackForTest drops it"):
        check_pipeline(pipeline)
    check_pipeline([JITTER, dict(type=PackForTest, meta_keys=('color_jitter', ))])
    assert 'PackForTest' not in ROOT_TRANSFORMS


def test_packed_keys_pass():
    check_pipeline([JITTER, CROP, dict(type='mmpretrain.PackInputs', meta_keys=(
        'color_jitter', 'crop_bbox', 'flip', 'ori_shape', 'crop_resize'))])
    check_pipeline([dict(type='LoadImageFromFile'), dict(type='PackSegInputs')], scope='mmseg')  # nothing handed over
    check_pipeline([dict(type='LoadImageFromFile')])  # no pack transform, nothing handed over


CONFIGS = sorted(p for p in glob.glob(f'{ROOT}/configs/**/*.py', recursive=True) if '/_base_/' not in p)


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: osp.relpath(p, f'{ROOT}/configs'))
def test_every_config_hands_over_its_keys(path):
    """The data loaders' pipelines, and every pipeline a config offers by name (``train_pipeline_gpu_decode``)."""
    cfg = Config.fromfile(path)
    check_handover(cfg)
    for name, value in cfg.items():
        if (name.endswith('pipeline') or '_pipeline_' in name) and isinstance(value, list):
            check_pipeline(value, name, cfg.get('default_scope'))


def test_the_check_sees_what_the_mim_pipeline_hands_over():
    from beit_mm.data.checks.handover import handover_keys
    pipeline = Config.fromfile(f'{ROOT}/configs/_base_/datasets/imagenet_mim.py').train_pipeline_gpu_decode
    assert [handover_keys(t, 'mmpretrain') for t in pipeline[:2]] == [
        ('color_jitter', ), ('crop_bbox', 'flip', 'ori_shape', 'two_view_resize')]


def test_built_loaders_and_transform_objects_are_passed_over():
    from mmengine.dataset import Compose
    check_handover(dict(train_dataloader=torch.utils.data.DataLoader([]), val_dataloader=None,
                        test_dataloader=dict(dataset=dict(pipeline=[Compose([]), dict(type='PackInputs')]))))
