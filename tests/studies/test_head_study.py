"""beit_mm.studies.heads in-process: each head's config rescaled with --iters, the runs with the training child stood
in for (reuse, refusals), the report against hand-worked numbers, and the CLI's refusal of a root without images."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from mmengine.config import Config

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.studies import heads, runs
from beit_mm.studies.settings import HeadStudySettings

from ..conftest import ROOT

TOOL_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get('PYTHONPATH')))))


def head_args(tmp_path, **changes) -> HeadStudySettings:
    args = dict(data_root=str(tmp_path / 'ade'), heads=list(heads.HEADS), seeds=[0], iters=None,
                work_dir=str(tmp_path / 'work'))
    args.update(changes)
    return HeadStudySettings(**args)


def test_iters_rescales_the_schedule_and_the_annealing(tmp_path):
    """``--iters 30``: every config the study runs ends its lr schedule and EoMT's mask annealing within 30 iterations
    and validates at the 30th."""
    args = head_args(tmp_path, iters=30)
    for head in heads.HEADS:
        cfg = heads.run_config(args, head, seed=0)
        assert cfg.train_cfg.max_iters == 30 and cfg.train_cfg.val_interval == 30, head
        assert all(s.get('end', 30) <= 30 for s in cfg.param_scheduler), (head, cfg.param_scheduler)
        annealing = cfg.model.get('mask_annealing')
        if annealing:
            assert max(annealing.end_steps) <= 30, (head, annealing)
        assert cfg.randomness.seed == 0 and cfg.train_dataloader.dataset.data_root == args.data_root
    assert heads.run_config(args, 'eomt', 0).model.mask_annealing  # the EoMT demo config anneals (the test bites)
    full = heads.run_config(head_args(tmp_path), 'upernet', 3)
    assert full.train_cfg.max_iters == heads.DEMO_ITERS and full.randomness.seed == 3


def test_heads_over_seeds_with_baseline_and_reuse(tmp_path, monkeypatch):
    """Every head and seed trains once on its written config, its metrics read from MMEngine's scalar file; the same
    study again reuses them, another --iters in the same work dir is refused."""
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=2, size=64, seed=0)
    trained = []

    def fake_train(log_path, config, kwargs):  # the child: a scalars.json whose mIoU names the run
        cfg = Config.fromfile(config)
        trained.append((config, cfg.train_cfg.max_iters, cfg.randomness.seed, cfg.val_dataloader.dataset.data_root))
        scalars = os.path.join(kwargs['work_dir'], '20261127_060000', 'vis_data')
        os.makedirs(scalars)
        with open(os.path.join(scalars, 'scalars.json'), 'w') as f:
            f.write(json.dumps(dict(loss=1.0, step=2)) + '\n')
            f.write(json.dumps(dict(mIoU=len(trained) + 0.5, aAcc=50.0, mAcc=25.0, step=2)) + '\n')
        open(log_path, 'w').close()
        return 0

    monkeypatch.setattr(runs, 'start_training', fake_train)
    args = head_args(tmp_path, data_root=root, seeds=[0, 1], iters=2)
    out = heads.run_study(args)
    assert [t[0] for t in trained] == [str(tmp_path / 'work' / h / f'seed{s}' / 'study_config.py')
                                       for h in heads.HEADS for s in (0, 1)]
    assert {t[1:] for t in trained} == {(2, 0, root), (2, 1, root)}
    k = 2 * list(heads.HEADS).index('eomt')  # runs before EoMT's: 2 seeds per head; the logs count from 1
    assert [r['mIoU'] for r in out['results']['eomt']] == [k + 1.5, k + 2.5]
    assert out['results']['upernet'][0]['settings'] == dict(config=heads.HEADS['upernet'], data_root=root, iters=2,
                                                            seed=0)
    assert 0.0 <= out['baseline']['aAcc'] <= 100.0 and set(out['baseline']) >= {'mIoU', 'aAcc', 'mAcc'}
    assert (tmp_path / 'work' / 'report.md').read_text() == out['text']
    assert json.loads((tmp_path / 'work' / 'report.json').read_text())['results'] == out['results']
    assert heads.run_study(args)['results'] == out['results']
    assert len(trained) == 2 * len(heads.HEADS)  # reused: nothing trained
    with pytest.raises(RuntimeError, match=r'other settings \(iters: 2 there, 3 now\)'):
        heads.run_study(head_args(tmp_path, data_root=root, seeds=[0, 1], iters=3))


def test_head_report():
    runs_of = lambda *values: [dict(mIoU=v, aAcc=v + 50, mAcc=v + 10, seconds=60.0 * v) for v in values]  # noqa: E731
    text = heads.head_report(head_args(pathlib.Path('/x'), seeds=[0, 1]),
                             {'upernet': runs_of(2.0, 4.0), 'eomt': runs_of(1.0, 1.0)},
                             dict(mIoU=9.0, aAcc=60.0, mAcc=14.29))
    lines = text.rstrip('\n').split('\n')
    assert lines[0] == f'# Heads on /x/ade: {heads.DEMO_ITERS} iterations each, seeds [0, 1]'
    assert lines[-3:] == ['| trivial baseline (majority class) | 9.00 | - | 60.00 | 14.29 | - |',
                          '| upernet | 3.00 ± 1.41 | 2.00, 4.00 | 53.00 ± 1.41 | 13.00 ± 1.41 | 3.00 ± 1.41 |',
                          '| eomt | 1.00 ± 0.00 | 1.00, 1.00 | 51.00 ± 0.00 | 11.00 ± 0.00 | 1.00 ± 0.00 |']


def test_cli_refuses_a_root_without_images(tmp_path):
    proc = subprocess.run([sys.executable, 'tools/analysis/head_study.py', '--data-root', str(tmp_path / 'none'),
                           '--work-dir', str(tmp_path / 'work')], cwd=ROOT, capture_output=True, text=True,
                          env=TOOL_ENV, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f'head_study.py: error: {tmp_path / "none"} has no images/training; make the demo data with bash '
        'tools/run_demo.sh (or tools/make_demo_data.py), or pass --data-root')
    assert not os.path.exists(tmp_path / 'work')
