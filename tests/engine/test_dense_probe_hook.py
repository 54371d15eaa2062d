"""beit_mm.DenseProbeHook in real training runs (tools/train.py on generated 'shapes' data): a run that learns ends
with a probe above its iteration-0 (random init) probe; a MIM run that cannot learn (learning rate 0) gets the plain
"not working" warning; the curve logic of the "falling" warning; the state carried in checkpoints."""
import json
import os

import pytest
from mmengine.config import Config

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.engine.hooks import DenseProbeHook
from beit_mm.studies.configs import rescale_iterations

from ..conftest import ROOT, run_tool

PIXELS = os.path.join(ROOT, 'configs', 'studies', 'beit_beit-tiny-p8_pixels-blockwise_1xb32-coslr-3k_shapes-64px.py')
LINEAR = os.path.join(ROOT, 'configs', 'studies', 'beit-tiny-p8_beit-pre_linear_1xb8-1.2k_shapes-64x64.py')


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('probe_data')
    labeled = make_demo_ade20k(str(root / 'shapes'), 64, 32, 64, seed=0, style='shapes')
    pool = make_demo_ade20k(str(root / 'pool'), 64, 0, 64, seed=1, style='shapes', with_annotations=False)
    return labeled, pool


def train(cfg: Config, work_dir) -> tuple[dict, str]:
    """tools/train.py on ``cfg``; its dense_probe.json and log."""
    config = os.path.join(os.path.dirname(work_dir), 'probe_config.py')  # beside the work dir: MMEngine dumps
    cfg.dump(config)  # the run's config into it as config.py, which must not be the file the run reads
    proc = run_tool(['tools/train.py', config, '--work-dir', str(work_dir)])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    with open(os.path.join(work_dir, 'dense_probe.json')) as f:
        return json.load(f), log


def test_training_lifts_the_probe_above_random_init(tmp_path):
    """The hook in a run whose backbone learns fast enough for a test on 2 CPU cores: the study's linear-decoder
    segmentation config from scratch (60 iterations) on the demo's 'classes' data, where a class has its own colour
    and texture; the probe ends above iteration 0's."""
    labeled = make_demo_ade20k(str(tmp_path / 'classes'), 64, 32, 64, seed=0)
    cfg = Config.fromfile(LINEAR)
    from mmseg.datasets import ADE20KDataset
    cfg.model.decode_head.num_classes = 22  # the demo's ADE20K ids go up to 22 (car 21, water 22)
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        loader.dataset.metainfo = dict(classes=ADE20KDataset.METAINFO['classes'][:22])
    rescale_iterations(cfg, 60)
    cfg.model.backbone.init_cfg = None
    for loader in (cfg.train_dataloader, cfg.val_dataloader, cfg.test_dataloader):
        loader.update(num_workers=0, persistent_workers=False)
        loader.dataset.data_root = labeled
    cfg.custom_hooks.append(dict(type='beit_mm.DenseProbeHook', data_root=labeled, num_classes=22, img_size=64,
                                 interval=30, num_train=64, num_val=32))
    cfg.default_hooks.logger.interval = 30
    curve, log = train(cfg, tmp_path / 'run')
    init, last = curve['init'], curve['history'][-1]
    assert [c['iter'] for c in curve['history']] == [30, 60]
    assert last['probe_mIoU'] > init['probe_mIoU'] + 1.0, (init, curve['history'])
    assert 'dense probe iteration 0 (init): probe mIoU' in log and 'dense probe iteration 60: probe mIoU' in log
    assert 'Pretraining is not working' not in log
    assert 'probe_mIoU: ' in log and 'knn_acc: ' in log and 'probe_mIoU_init: ' in log  # the LoggerHook's line


def test_learning_rate_zero_triggers_the_warning(data, tmp_path):
    """A MIM run (the study's pixel-target config) with lr 0: the probe stays at its iteration-0 value and the hook
    says, once, that pretraining is not working."""
    labeled, pool = data
    cfg = Config.fromfile(PIXELS)
    rescale_iterations(cfg, 3)
    cfg.train_dataloader.update(num_workers=0, persistent_workers=False, batch_size=8)
    cfg.train_dataloader.dataset.data_root = pool
    cfg.optim_wrapper.optimizer.lr = 0.0
    probe = next(h for h in cfg.custom_hooks if h.type == 'beit_mm.DenseProbeHook')
    probe.update(data_root=labeled, interval=1, patience=2, num_train=32, num_val=16)
    curve, log = train(cfg, tmp_path / 'run')
    # the weights do not move; the probe moves only by float noise (oneDNN kernels may round differently per call)
    assert all(abs(c['probe_mIoU'] - curve['init']['probe_mIoU']) < 0.5 for c in curve['history']), curve
    assert log.count('Pretraining is not working') == 1, log[-3000:]  # once, at the second check
    assert 'after 2 checks (2 iterations) the frozen features are no better for segmentation than at iteration 0' \
        in log


def test_falling_curve_warns_once():
    hook = DenseProbeHook(data_root='unused', num_classes=7, img_size=64, patience=10, max_falls=3)
    hook.init_metrics = dict(probe_mIoU=10.0)
    messages = []
    for i, value in enumerate([20.0, 25.0, 24.0, 23.0, 22.0, 21.0], start=1):
        hook.history.append(dict(iter=100 * i, probe_mIoU=value, majority_mIoU=5.0))
        messages.append(hook.warnings())
    assert messages[:4] == [[]] * 4
    assert len(messages[4]) == 1 and 'fell at 3 checks in a row (25.00 -> 24.00 -> 23.00 -> 22.00 at iterations ' \
        '200..500)' in messages[4][0]
    assert messages[5] == []  # once


def test_state_travels_in_checkpoints():
    hook = DenseProbeHook(data_root='unused', num_classes=7, img_size=64)
    hook.init_metrics, hook.history, hook.warned = dict(probe_mIoU=1.0), [dict(iter=5, probe_mIoU=2.0)], ['falling']
    checkpoint = {}
    hook.before_save_checkpoint(None, checkpoint)
    resumed = DenseProbeHook(data_root='unused', num_classes=7, img_size=64)
    resumed.after_load_checkpoint(None, checkpoint)
    assert (resumed.init_metrics, resumed.history, resumed.warned) == (hook.init_metrics, hook.history, hook.warned)
