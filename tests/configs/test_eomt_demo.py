"""The EoMT demo config trained through ``tools/train.py`` on tiny data, and the mask-annealing schedule it applies at
every step, exactly (1e-6), against tue-mps/eomt @ 7bd19dd ``training/lightning_module.py:199-209`` evaluated at the
optimizer steps done before each batch (``lightning_module.py:211-224``)."""
import json
import os
import os.path as osp
import re

import pytest
from mmengine.config import Config


from ..conftest import ROOT, run_tool
from ..models.test_mask_annealing import official_probability

DEMO = osp.join(ROOT, 'configs', 'demo', 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')
ITERS = 6
# the demo's structure (block j starts where block j - 1 ends) on a 6-step run: each block is seen before its start
# (probability 1), annealing (between 0 and 1) and after its end (0); the last end at step 5
STARTS, ENDS = [1, 3], [3, 5]


@pytest.fixture(scope='module')
def demo_run(tmp_path_factory, ade_demo_root):
    tmp = tmp_path_factory.mktemp('eomt_demo')
    cfg = Config.fromfile(DEMO)
    cfg.model.mask_annealing = dict(cfg.model.mask_annealing, start_steps=STARTS, end_steps=ENDS)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = ade_demo_root
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.max_iters = ITERS
    cfg.train_cfg.val_interval = ITERS
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2)]
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = ITERS
    cfg.work_dir = str(tmp / 'work')
    path = tmp / osp.basename(DEMO)
    cfg.dump(str(path))
    proc = run_tool(['tools/train.py', str(path)])
    return proc, tmp / 'work'


def _scalars(work_dir) -> list[dict]:
    files = [osp.join(d, f) for d, _, fs in os.walk(work_dir) for f in fs if f == 'scalars.json']
    assert len(files) == 1, files
    with open(files[0]) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_demo_config_trains_and_evaluates(demo_run):
    proc, work = demo_run
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert 'dataset check passed' in log
    assert re.search(rf'Iter\(train\) \[{ITERS}/{ITERS}\]', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert osp.exists(work / f'iter_{ITERS}.pth')
    train = [r for r in _scalars(work) if 'loss' in r]
    assert len(train) == ITERS
    # the loss of every prediction: the output's and the 2 masked blocks' (suffix _block_-j), each finite
    keys = {'loss_cls', 'loss_mask', 'loss_dice'} | {f'loss_{k}_block_-{j}' for k in ('cls', 'mask', 'dice')
                                                      for j in (1, 2)}
    assert keys <= set(train[0]), sorted(train[0])


def test_annealing_at_every_step_equals_the_official_rule(demo_run):
    proc, work = demo_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    train = [r for r in _scalars(work) if 'loss' in r]
    for record in train:
        step = record['iter'] - 1  # logged after the batch that ran with `step` optimizer steps done
        for j, (start, end) in enumerate(zip(STARTS, ENDS)):
            expected = official_probability(start, step, end)
            assert record[f'attn_mask_prob_{j}'] == pytest.approx(expected, abs=1e-6), (step, j)
    seen = {(j, 0.0 < r[f'attn_mask_prob_{j}'] < 1.0) for r in train for j in range(2)}
    assert seen == {(0, True), (0, False), (1, True), (1, False)}  # each block seen annealing and not
