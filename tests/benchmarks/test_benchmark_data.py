"""``beit_mm.benchmarks.data_pipeline`` (``tools/analysis/benchmark_data.py``): the workers arithmetic on known
numbers, and every recipe's train dataset built from its full-size config on tiny demo sets in the real layouts
(what the tool times), giving a positive rate."""
import os.path as osp

import pytest

from beit_mm.benchmarks.data_pipeline import (RECIPES, build_train_dataset, loader_settings, make_demo_sets,
                                              worker_rate, workers_needed)

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


def test_every_recipe_pipeline_runs_on_demo_sets(tmp_path):
    roots = make_demo_sets(str(tmp_path), ade_size=64, imagenet_size=64, count=4)
    assert {r.layout for r in RECIPES} == set(roots)
    for recipe in RECIPES:
        dataset = build_train_dataset(osp.join(ROOT, recipe.config), roots[recipe.layout])
        assert len(dataset) >= 4, recipe.name
        per_cpu_second, per_second = worker_rate(dataset, images=2, warmup=1)
        assert per_cpu_second > 0 and per_second > 0, recipe.name
