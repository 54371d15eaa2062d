"""``beit_mm.benchmarks.data_pipeline``: the workers arithmetic on known numbers, and every recipe's train datasets
built from its full-size config on tiny image sets, giving positive rates with the preprocessor's CPU cost."""
import os.path as osp

import pytest

from beit_mm.benchmarks.data_pipeline import (RECIPES, Measurement, data_preprocessor, load_config, loader_settings,
                                              make_image_sets, measure_recipe, pipelines, workers_needed)

from ..conftest import ROOT


def test_workers_needed_feeds_the_rate_with_headroom():
    assert workers_needed(800, 100) == 10  # 1.25 x 800 / 100
    assert workers_needed(26, 13) == 3  # 2.5 -> 3
    assert workers_needed(1, 1000) == 2  # never one worker alone
    assert workers_needed(800, 100, headroom=1.0) == 8
    with pytest.raises(ValueError, match='positive'):
        workers_needed(800, 0)


def test_loader_settings_name_no_prefetch_factor():
    """PyTorch refuses a prefetch factor with ``num_workers=0``, which tests and CPU runs set on these configs."""
    assert loader_settings(6) == dict(num_workers=6, pin_memory=True, persistent_workers=True)


def test_every_recipe_pipeline_runs_on_small_image_sets(tmp_path):
    roots = make_image_sets(str(tmp_path), ade_size=64, imagenet_size=(48, 64), count=4)
    assert {r.layout for r in RECIPES} == set(roots)
    for recipe in RECIPES:
        m = measure_recipe(recipe, osp.join(ROOT, recipe.config), roots[recipe.layout], images=2, gpu_rate=100.0)
        assert isinstance(m, Measurement)
        rates = (m.reference, m.new, m.reference_with_preprocessor, m.new_with_preprocessor, m.new_wall)
        assert all(r > 0 for r in rates), (recipe.name, rates)
        assert m.new_with_preprocessor <= m.new and m.workers_new >= 2
        if 'ADE20K' not in recipe.name:  # the GPU-decode pipeline, its preprocessor cost on the CPU
            assert m.gpu_decode > 0 and m.gpu_decode_preprocessor_seconds > 0 and m.workers_gpu_decode >= 2
        else:
            assert m.gpu_decode is None and m.workers_gpu_decode is None


def test_mim_recipes_compare_the_exact_pipeline_with_the_draft_one():
    """The reference the tool times is the exact pipeline (whole-image decode), the new one the config's own."""
    for recipe in RECIPES:
        cfg = load_config(osp.join(ROOT, recipe.config))
        kinds = {k: [t['type'].split('.')[-1] for t in p] for k, p in pipelines(cfg).items()}
        assert kinds['new'] == [t['type'].split('.')[-1] for t in cfg.train_dataloader.dataset.pipeline]
        assert 'LoadImageFromFile' in kinds['reference'], recipe.name
        if 'MIM' in recipe.name:
            assert 'DecodeTwoViewRandomResizedCrop' in kinds['new'] and 'LoadImageFromFile' not in kinds['new']
            assert 'EncodedTwoViewRandomResizedCrop' in kinds['gpu_decode']
        elif 'ImageNet' in recipe.name:
            assert 'DecodeRandomResizedCrop' in kinds['new'] and 'LoadImageFromFile' not in kinds['new']
            assert 'EncodedRandomResizedCrop' in kinds['gpu_decode']
        else:
            assert 'gpu_decode' not in kinds
        if 'ADE20K' in recipe.name:  # the distortion moves to the data preprocessor, whose cost the tool adds
            assert {'RandomCrop', 'PhotoMetricDistortion'} <= set(kinds['reference'])
            assert {'HistogramRandomCrop', 'SamplePhotoMetricDistortion'} <= set(kinds['new'])
            assert cfg.model.data_preprocessor.type == 'beit_mm.PhotoMetricSegDataPreProcessor'
        if 'ImageNet' in recipe.name:  # RandAugment and erasing move to the data preprocessor, whose cost is added
            assert {'RandAugment', 'RandomErasing'} <= set(kinds['reference'])
            assert {'SampleRandAugment', 'SampleRandomErasing'} <= set(kinds['new'])
            assert data_preprocessor(cfg).type == 'beit_mm.AugmentClsDataPreprocessor'


def test_device_table_times_each_pipeline_and_a_dataloader(tmp_path):
    """``--device`` on the CPU: the fine-tuning recipe's three pipelines, each preprocessor timed per batch, the
    GPU-decode batch's JPEG decode alone, and MMEngine's DataLoader with a worker through the preprocessor."""
    from beit_mm.benchmarks.data_pipeline import measure_on_device
    roots = make_image_sets(str(tmp_path), ade_size=64, imagenet_size=(48, 64), count=4)
    recipe = next(r for r in RECIPES if r.name.startswith('ImageNet fine-tuning'))
    found = measure_on_device(recipe, osp.join(ROOT, recipe.config), roots['imagenet'], 'cpu', gpu_rate=100.0,
                              batch=2, batches=1, workers=1)
    assert [m.kind for m in found] == ['reference', 'new', 'gpu_decode']
    for m in found:
        assert m.batch == 2 and m.preprocessor_seconds > 0 and m.loader_rate > 0, m
        assert m.step_seconds == 0.02 and m.rate_with_preprocessor < 100.0
        assert (m.decode_seconds is not None) == (m.kind == 'gpu_decode'), m
