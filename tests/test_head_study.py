"""tools/analysis/head_study.py: the three heads' demo configs over seeds on an ADE20K-layout root (a tiny one here,
2 iterations each), the majority-class baseline next to them, finished runs reused and runs with other settings
refused."""
import importlib.util
import os.path as osp

import pytest

from beit_mm.data.demo import make_demo_ade20k

from .conftest import ROOT


def _tool():
    spec = importlib.util.spec_from_file_location('head_study', osp.join(ROOT, 'tools', 'analysis', 'head_study.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_three_heads_with_baseline_and_reuse(tmp_path):
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=2, size=64, seed=0)
    tool = _tool()
    argv = ['--data-root', root, '--iters', '2', '--seeds', '0', '--work-dir', str(tmp_path / 'work')]
    out = tool.main(argv)
    assert list(out['results']) == ['upernet', 'mask2former', 'eomt']
    assert all(len(runs) == 1 and 0.0 <= runs[0]['mIoU'] <= 100.0 for runs in out['results'].values())
    assert set(out['baseline']) >= {'mIoU', 'aAcc', 'mAcc'} and 0.0 <= out['baseline']['aAcc'] <= 100.0
    text = open(tmp_path / 'work' / 'report.md').read()
    assert 'trivial baseline (majority class)' in text and '| mask2former |' in text and '| eomt |' in text
    assert tool.main(argv)['results'] == out['results']  # reused: metrics.json with the same settings
    with pytest.raises(Exception, match='iters'):  # the same work dir with another budget is refused, not mixed
        tool.main(argv[:3] + ['3'] + argv[4:])


def test_iters_rescales_the_schedule_and_the_annealing():
    """``--iters 30``: every config the study runs ends its lr schedule and EoMT's mask annealing within 30 iterations
    and validates at the 30th (at f67fafc only max_iters and the intervals changed: the poly schedule still ended at
    1000 and EoMT still masked at the end of training)."""
    tool = _tool()
    args = tool.parse_args(['--iters', '30'])
    for head in tool.HEADS:
        cfg = tool.run_config(args, head, seed=0)
        assert cfg.train_cfg.max_iters == 30 and cfg.train_cfg.val_interval == 30, head
        assert all(s.get('end', 30) <= 30 for s in cfg.param_scheduler), (head, cfg.param_scheduler)
        annealing = cfg.model.get('mask_annealing')
        if annealing:
            assert max(annealing.end_steps) <= 30, (head, annealing)
    assert tool.run_config(args, 'eomt', 0).model.mask_annealing  # the EoMT demo config anneals (the test bites)
