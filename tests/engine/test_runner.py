"""``beit_mm.engine.runner``: each run of a process has its own MMEngine instances, keeps a training's config dump
and leaves no data loader workers behind."""
import os.path as osp
import time

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.engine.runner import build_runner

from ..conftest import ROOT

CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')


def runners_started_in_one_second(tmp_path, monkeypatch, build, edit=lambda cfg: None) -> list:
    """Two runners of ``CONFIG`` (work dirs ``first`` and ``second`` under ``tmp_path``, data of their own) built by
    ``build(cfg)`` after ``edit(cfg)``, with the clock frozen so that both start in one second."""
    now = time.localtime()
    monkeypatch.setattr(time, 'localtime', lambda *args: now)
    root = make_demo_ade20k(str(tmp_path / 'ade'), 2, 1, size=64)
    runners = []
    for name in ('first', 'second'):
        cfg = Config.fromfile(CONFIG)
        for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
            cfg[loader].dataset.data_root = root
        cfg.work_dir = str(tmp_path / name)
        edit(cfg)
        runners.append(build(cfg))
    return runners


def test_two_runs_started_in_one_second_log_into_their_own_files(tmp_path, monkeypatch):
    """MMEngine names a runner's logger, message hub and visualizer ``<experiment>_<start second>`` and reuses an
    existing instance of that name: a quick training and then its test, in one process within one second, wrote the
    test's log into the training's log file (no log in the test's work dir, seen in a 2-process launch). The clock
    is frozen so that both runners start in one second; conftest's per-test runner names are undone, so this is the
    product's own naming."""
    monkeypatch.undo()  # conftest._own_runner_names: every in-process test runner gets a name of its own
    first, second = runners_started_in_one_second(tmp_path, monkeypatch, build_runner)
    assert first.timestamp == second.timestamp
    assert second.logger is not first.logger
    assert osp.dirname(second.logger.log_file) == osp.join(str(tmp_path / 'second'), second.timestamp)
    assert second.message_hub is not first.message_hub
    assert second.visualizer is not first.visualizer
    assert second.experiment_name.startswith(osp.splitext(osp.basename(CONFIG))[0])


@pytest.mark.parametrize('runner_type', [None, 'Runner'])
def test_config_dump_in_the_log_dir(tmp_path, runner_type):
    """``config_dump_in_log_dir`` (``tools/test.py``'s runner): the config goes to ``<work_dir>/<timestamp>/``, not
    over ``<work_dir>/<config file name>`` (a training's dump there is kept), also for a config's ``runner_type``."""
    cfg = Config.fromfile(CONFIG)
    cfg.work_dir = str(tmp_path / 'work')
    if runner_type is not None:
        cfg.runner_type = runner_type
    runner = build_runner(cfg, config_dump_in_log_dir=True)
    name = osp.basename(CONFIG)
    assert osp.isfile(osp.join(runner.log_dir, name)) and not osp.exists(osp.join(cfg.work_dir, name))
    assert isinstance(runner, Runner)


def test_a_run_stops_its_dataloader_workers(tmp_path):
    """``beit_mm.apis.train.train`` and ``run_test`` stop their loaders' persistent workers when the run ends. Left
    alive, they were stopped by a later garbage collection, which waited torch's 5 s join timeout per worker (the EoMT
    COCO panoptic demo, 4 iterations and then its test in one process: 23 s, now 3 s)."""
    import multiprocessing

    from beit_mm.apis.testing import run_test
    from beit_mm.apis.train import train
    root = make_demo_ade20k(str(tmp_path / 'ade'), 4, 2, size=64)
    options = {f'{loader}.{key}': value for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')
               for key, value in (('dataset.data_root', root), ('num_workers', 2), ('persistent_workers', True))}
    work_dir = str(tmp_path / 'work')
    earlier = set(multiprocessing.active_children())  # another test's, in this process
    train(CONFIG, work_dir=work_dir, cfg_options=options)
    assert set(multiprocessing.active_children()) - earlier == set()
    run_test(CONFIG, osp.join(work_dir, 'iter_4.pth'), work_dir=str(tmp_path / 'test'), cfg_options=options)
    assert set(multiprocessing.active_children()) - earlier == set()
