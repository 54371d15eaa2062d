"""Each config family's demo as users launch it on several GPUs: ``tools/dist_train.sh CONFIG 2`` (2 gloo processes on
CPU) for 2 iterations ending in a validation, then ``tools/dist_test.sh`` on its checkpoint, printing the metric.

Every run has a time limit: a process left waiting in a collective (a metric or hook that synchronises on one rank
only) fails the test with the command and its last output instead of hanging the suite. Sizes are the smallest that
still run each path (3 validation images: an odd number for 2 processes, 8 training images, 2 per batch).
"""
from __future__ import annotations

import os
import os.path as osp
import re
import subprocess
import sys

import pytest

from ..conftest import ROOT

RUN_TIMEOUT = 240  # seconds per launch; a demo's launch takes well under a minute on 2 cores
NUM_TRAIN, NUM_VAL = 8, 3
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def _loaders(root: str) -> list[str]:
    return [option for loader in LOADERS for option in (
        f'{loader}.dataset.data_root={root}', f'{loader}.num_workers=0', f'{loader}.persistent_workers=False')]


def _short(root: str) -> list[str]:
    """2 iterations (batch 2 per process), a validation and a checkpoint after the second."""
    return [*_loaders(root), 'train_dataloader.batch_size=2', 'train_cfg.max_iters=2', 'train_cfg.val_interval=2',
            'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1']


def _data(layout: str, base: str) -> str:
    """The demo data of ``layout`` under ``base`` (made once per module)."""
    root = osp.join(base, layout)
    if layout == 'coco':
        from beit_mm.data.demo_coco import make_demo_coco
        return make_demo_coco(root, NUM_TRAIN, NUM_VAL, 64, seed=0)
    raise ValueError(layout)


# family -> (demo config, data layout, extra options given the data root, the metric the runs print). Only the EoMT
# COCO panoptic demo so far; the other families' demos are still to be added here.
FAMILIES = {
    'eomt-panoptic': ('eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py', 'coco', lambda root: [],
                      'coco_panoptic/PQ'),
}


def _run(cmd: list[str], cwd: str) -> str:
    """``cmd`` with the checkout on PYTHONPATH, 1 thread per process; it must exit 0 within :data:`RUN_TIMEOUT`."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
               PYTHON=sys.executable)
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b'').decode(errors='replace') + (error.stderr or b'').decode(errors='replace')
        pytest.fail(f'{" ".join(cmd)} ran past {RUN_TIMEOUT} s (a process waiting in a collective the other never '
                    f'enters?); its last output:\n{output[-4000:]}')
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f'{" ".join(cmd)} exited {proc.returncode}:\n{output[-6000:]}'
    return output


@pytest.fixture(scope='module')
def data_base(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp('data'))


@pytest.fixture(scope='module', params=list(FAMILIES))
def family_run(request, data_base, tmp_path_factory) -> tuple[str, str, str]:
    """(family, training output, test output) of ``dist_train.sh CONFIG 2`` then ``dist_test.sh CONFIG CKPT 2``."""
    family = request.param
    config, layout, extra, _ = FAMILIES[family]
    config = osp.join(ROOT, 'configs', 'demo', config)
    root = _data(layout, data_base)
    work_dir = str(tmp_path_factory.mktemp(family))
    options = [*_short(root), *extra(root)]
    train = _run(['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), config, '2', '--work-dir', work_dir,
                  '--cfg-options', *options], work_dir)
    test = _run(['bash', osp.join(ROOT, 'tools', 'dist_test.sh'), config, osp.join(work_dir, 'iter_2.pth'), '2',
                 '--work-dir', work_dir, '--cfg-options', *options], work_dir)
    return family, train, test


def test_family_trains_validates_and_tests_on_two_processes(family_run):
    family, train, test = family_run
    metric = FAMILIES[family][3]
    assert 'Iter(train) [2/2]' in train, train[-3000:]
    for mode, output in (('val', train), ('test', test)):
        found = re.findall(rf'Iter\({mode}\).*?{re.escape(metric)}: ([\d.]+|None)', output)
        assert found, f'{family}: no {mode} {metric} in the output:\n{output[-3000:]}'
        print(f'{family} {mode} {metric}: {found[-1]}')
