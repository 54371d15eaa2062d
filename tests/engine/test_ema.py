"""``tools/train.py --ema``: MMEngine's EMAHook with unilm's decay, EMA weights saved, and a SIGKILL + ``--resume``
that restores them bit for bit.

Reference for the update rule: unilm ``beit/run_class_finetuning.py`` (``--model_ema_decay 0.9999``, timm ``ModelEma``:
``ema = decay * ema + (1 - decay) * w`` after every optimizer step) = MMEngine ``ExponentialMovingAverage`` with
``momentum = 1 - decay = 1e-4`` (``ema.lerp_(w, momentum)``). Checked exactly (``torch.equal``) from consecutive
checkpoints, which hold the EMA weights in ``state_dict`` and the raw weights in ``ema_state_dict`` (MMEngine swaps
them so that evaluation and deployment get the EMA).

Kill/resume as ``tests/engine/test_kill_resume.py`` (deterministic kill point ``tests/support/kill_points.py``): run A
uninterrupted for 6 iterations; run B SIGKILLed right after iteration 5's optimizer step (``iter_4.pth`` the last
checkpoint), then ``--resume``; A's and B's ``iter_6.pth`` must be equal tensor for tensor, EMA and raw weights.
"""
import os.path as osp
import sys

import pytest
import torch

from beit_mm.data.demo.ade20k import make_demo_ade20k
from tests.engine.test_kill_resume import CONFIG, ROOT, _config, _finish, _kill, _launch, _wait_for

TRAIN = [sys.executable, osp.join(ROOT, 'tools', 'train.py')]
UNILM_EMA_DECAY = 0.9999  # unilm beit/run_class_finetuning.py, --model_ema_decay default


def _options(data_root: str, iters: int, interval: int) -> list:
    return ['--ema', '--cfg-options', 'randomness.seed=0', 'randomness.deterministic=True',
            f'train_cfg.max_iters={iters}', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
            f'default_hooks.checkpoint.interval={interval}', 'default_hooks.checkpoint.max_keep_ckpts=10',
            'default_hooks.visualization.interval=1000', f'train_dataloader.dataset.data_root={data_root}']


def _load(path: str) -> dict:
    return torch.load(path, map_location='cpu', weights_only=True)


def _raw(checkpoint: dict) -> dict:
    """The raw (non-averaged) weights of a checkpoint written with --ema, under the model's names."""
    ema = checkpoint['ema_state_dict']
    return {k[len('module.'):]: v for k, v in ema.items() if k.startswith('module.')}


@pytest.fixture(scope='module')
def data_root(tmp_path_factory) -> str:
    return make_demo_ade20k(str(tmp_path_factory.mktemp('data') / 'ade_demo'), num_train=8, num_val=2, size=96)


def test_ema_update_rule_is_unilms(data_root, tmp_path):
    work_dir = str(tmp_path / 'ema')
    proc, log = _launch([*TRAIN, CONFIG, '--work-dir', work_dir, *_options(data_root, 3, 1)], work_dir)
    text = _finish(proc, log)
    assert "--ema: custom_hooks += {'type': 'EMAHook'" in text
    c2, c3 = _load(osp.join(work_dir, 'iter_2.pth')), _load(osp.join(work_dir, 'iter_3.pth'))
    ema2, ema3, raw3 = c2['state_dict'], c3['state_dict'], _raw(c3)
    params = [k for k, v in ema3.items() if v.is_floating_point() and 'running_' not in k]
    assert params and set(params) <= set(raw3)
    moved = [k for k in params if not torch.equal(ema3[k], raw3[k])]
    assert len(moved) > len(params) // 2, 'the saved state_dict should hold the EMA, not the raw weights'
    momentum = 1 - UNILM_EMA_DECAY
    wrong = [k for k in params if not torch.equal(ema3[k], torch.lerp(ema2[k], raw3[k], momentum))]
    assert not wrong, f'{len(wrong)} EMA tensors differ from (1 - m) * ema + m * w with m = {momentum}: {wrong[:4]}'


def test_ema_kill_and_resume_is_bit_identical(data_root, tmp_path):
    iters = 6
    pause_5 = _config(tmp_path, 'pause_5', "custom_hooks = [dict(type='beit_mm.PauseAtIterationHook', iteration=5)]\n")
    ref_dir, work_dir = str(tmp_path / 'reference'), str(tmp_path / 'killed')
    ref, ref_log = _launch([*TRAIN, CONFIG, '--work-dir', ref_dir, *_options(data_root, iters, 2)], ref_dir)
    killed, killed_log = _launch([*TRAIN, pause_5, '--work-dir', work_dir, *_options(data_root, iters, 2)], work_dir)
    _wait_for(lambda: osp.exists(osp.join(work_dir, 'paused_at_5')), killed, killed_log)
    _kill(killed)
    resumed, resumed_log = _launch([*TRAIN, CONFIG, '--work-dir', work_dir, '--resume',
                                    *_options(data_root, iters, 2)], work_dir)
    text = _finish(resumed, resumed_log)
    assert 'resumed epoch: 0, iter: 4' in text, text[-3000:]
    _finish(ref, ref_log)
    a, b = _load(osp.join(ref_dir, f'iter_{iters}.pth')), _load(osp.join(work_dir, f'iter_{iters}.pth'))
    for part in ('state_dict', 'ema_state_dict'):
        assert a[part].keys() == b[part].keys()
        different = [k for k in a[part] if not torch.equal(a[part][k], b[part][k])]
        assert not different, f'{part}: {len(different)} of {len(a[part])} tensors differ, e.g. {different[:5]}'
    raw = _raw(a)
    assert any(not torch.equal(a['state_dict'][k], raw[k]) for k in raw if k in a['state_dict']), \
        'EMA and raw weights are equal: the EMA is not in effect'
    print(f"EMA kill/resume: {len(a['state_dict'])} EMA tensors and {len(a['ema_state_dict'])} raw tensors "
          'bit-identical')
