"""A checkpoint from a stranger never runs what it carries: every tool given a checkpoint whose stored configs would
write a marker if executed leaves no marker and either works from the user's config file or names its refusal."""
from __future__ import annotations

import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.apis import build_from_config
from beit_mm.engine.resume import check_start_checkpoint, set_resume
from beit_mm.apis import build_from_config, infer_images

from ..conftest import ROOT, load_tool
from ..tools.test_tools import CONFIG, _cfg

MIM = osp.join(ROOT, 'configs', 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')


def hostile_code(marker: str, cfg: Config) -> str:
    """A config source that is also a valid config: what a stranger's checkpoint can carry."""
    return f'_ = open({marker!r}, "w").write("ran")\n{cfg.pretty_text}'


def make_hostile(checkpoint: dict, marker: str, cfg: Config, path: str) -> str:
    """Save ``checkpoint`` with the marker-writing code under every stored-config key MMEngine knows."""
    code = hostile_code(marker, cfg)
    checkpoint = dict(checkpoint)
    checkpoint['meta'] = {**(checkpoint.get('meta') or {}), 'cfg': code, 'config': code}
    hub = dict(checkpoint.get('message_hub') or {})
    hub['runtime_info'] = {**(hub.get('runtime_info') or {}), 'cfg': code}
    checkpoint['message_hub'] = hub
    torch.save(checkpoint, path)
    return path


@pytest.fixture(scope='module')
def runner_checkpoint(tmp_path_factory, ade_demo_root) -> dict:
    """A real training checkpoint of the tiny segmentor (2 iterations), as MMEngine's runner saves it."""
    work_dir = str(tmp_path_factory.mktemp('run'))
    cfg = _cfg(ade_demo_root, work_dir, experiment_name='hostile_source', val_cfg=None, val_dataloader=None,
               val_evaluator=None)
    cfg.train_cfg.update(max_iters=2, val_interval=100)
    cfg.default_hooks.checkpoint.update(interval=2)
    Runner.from_cfg(cfg).train()
    return torch.load(osp.join(work_dir, 'iter_2.pth'), map_location='cpu', weights_only=True)


@pytest.fixture
def marker(tmp_path) -> str:
    path = str(tmp_path / 'MARKER')
    yield path
    assert not osp.exists(path), 'the checkpoint\'s stored config was executed'


def _mim_checkpoint(tmp_path, marker) -> tuple[str, str]:
    cfg = Config.fromfile(MIM)
    model = build_from_config(cfg)
    config = str(tmp_path / 'mim_config.py')
    cfg.dump(config)
    return config, make_hostile({'state_dict': model.state_dict()}, marker, cfg, str(tmp_path / 'hostile.pth'))


@pytest.mark.parametrize('to', ['hf', 'timm'])
def test_convert_to_hub_refuses_without_config_and_works_with_it(tmp_path, marker, to):
    config, hostile = _mim_checkpoint(tmp_path, marker)
    convert = load_tool('tools/convert_checkpoint.py')
    out = str(tmp_path / ('hf' if to == 'hf' else 'beit.pth'))
    with pytest.raises(SystemExit, match=r'--to needs --config CONFIG.*does not build a model from the config stored '
                       r'inside a checkpoint.*Nothing was written'):
        convert.main(['--to', to, hostile, out])
    assert not osp.exists(marker) and not osp.exists(out)
    convert.main(['--to', to, hostile, out, '--config', config])
    assert osp.exists(osp.join(out, 'model.safetensors') if to == 'hf' else out)


def test_resume_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint, ade_demo_root):
    cfg = _cfg(ade_demo_root, str(tmp_path / 'work'), experiment_name='hostile_resume', val_cfg=None,
               val_dataloader=None, val_evaluator=None)
    hostile = make_hostile(runner_checkpoint, marker, cfg, str(tmp_path / 'iter_2.pth'))
    opened = set_resume(cfg, hostile)
    runner = Runner.from_cfg(cfg)
    check_start_checkpoint(runner, cfg, opened)
    runner.train()  # resumes at iteration 2 and runs to the config's 4
    assert runner.iter == 4


def test_load_from_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint, ade_demo_root):
    cfg = _cfg(ade_demo_root, str(tmp_path / 'work'), experiment_name='hostile_load_from')
    cfg.load_from = make_hostile(runner_checkpoint, marker, cfg, str(tmp_path / 'hostile.pth'))
    runner = Runner.from_cfg(cfg)
    check_start_checkpoint(runner, cfg)
    runner.load_or_resume()
    assert torch.equal(runner.model.state_dict()['backbone.cls_token'],
                       runner_checkpoint['state_dict']['backbone.cls_token'])


def test_infer_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint, ade_demo_root):
    hostile = make_hostile(runner_checkpoint, marker, Config.fromfile(CONFIG), str(tmp_path / 'hostile.pth'))
    images = osp.join(ade_demo_root, 'images', 'validation')
    preds = infer_images(CONFIG, hostile, [images], str(tmp_path / 'out'))
    assert len(preds) == 2


def test_tools_test_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint, ade_demo_root):
    from beit_mm.apis.testing import run_test
    hostile = make_hostile(runner_checkpoint, marker, Config.fromfile(CONFIG), str(tmp_path / 'hostile.pth'))
    options = {f'{loader}.dataset.data_root': ade_demo_root for loader in ('val_dataloader', 'test_dataloader')}
    result = run_test(CONFIG, hostile, work_dir=str(tmp_path / 'test'), cfg_options=options)
    assert 'mIoU' in result['metrics']


def test_export_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint):
    hostile = make_hostile(runner_checkpoint, marker, Config.fromfile(CONFIG), str(tmp_path / 'hostile.pth'))
    out = str(tmp_path / 'model.onnx')
    load_tool('tools/export.py').main([CONFIG, hostile, '--shape', '64', '64', '--out', out, '--no-check'])
    assert osp.getsize(out) > 0


def test_probe_does_not_run_the_stored_config(tmp_path, marker, runner_checkpoint):
    from beit_mm.models.builder import load_for_features as probe_model
    hostile = make_hostile(runner_checkpoint, marker, Config.fromfile(CONFIG), str(tmp_path / 'hostile.pth'))
    model = probe_model(CONFIG, hostile)  # what tools/analysis/probe.py loads
    assert torch.equal(model.state_dict()['backbone.cls_token'], runner_checkpoint['state_dict']['backbone.cls_token'])


def test_opened_checkpoints_carry_no_config_source(tmp_path, marker, runner_checkpoint):
    """What every loader gets (beit_mm's opener and MMEngine's, which is the same function): no config source."""
    from mmengine.runner.checkpoint import _load_checkpoint

    from beit_mm.apis import open_checkpoint
    hostile = make_hostile(runner_checkpoint, marker, Config.fromfile(CONFIG), str(tmp_path / 'hostile.pth'))
    for opened in (open_checkpoint(hostile), _load_checkpoint(hostile, map_location='cpu')):
        assert 'cfg' not in opened['meta'] and 'config' not in opened['meta']
        assert 'cfg' not in opened['message_hub']['runtime_info']
        assert opened['meta']['iter'] == 2
