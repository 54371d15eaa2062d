"""``tools/train.py --compile``: ``beit_mm.CompileHook`` compiles the whole model (``fullgraph=True``) and the tiny
BEiT UPerNet config trains 2 iterations on CPU with it; the losses match an uncompiled run with the same seed. The
config's own ``compile`` setting (CUDA only by default) leaves a CPU run eager."""
import os
import os.path as osp
import re

import pytest

from beit_mm.data.demo.ade20k import make_demo_ade20k

from ..conftest import run_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
LOSS = re.compile(r'Iter\(train\) \[\s*(\d+)/\d+\].*?\bloss: ([\d.]+)')


def _train(work_dir: str, data_root: str, *extra: str) -> str:
    data = [f'{dl}.dataset.data_root={data_root}' for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    os.makedirs(work_dir)
    cmd = ['tools/train.py', CONFIG, '--work-dir', work_dir, *extra, '--cfg-options', 'train_cfg.max_iters=2',
           'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=100', *data]
    proc = run_tool(cmd, cwd=work_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-5000:]
    return output


@pytest.mark.parametrize('backend', ['aot_eager'])
def test_train_with_compile(tmp_path, backend):
    """AOTAutograd traces forward and backward (inductor's C++ code generation is exercised by the benchmark run in
    the README, not here: it takes minutes on 2 cores)."""
    data_root = make_demo_ade20k(str(tmp_path / 'ade_demo'), num_train=4, num_val=1, size=64)
    plain = _train(str(tmp_path / 'plain'), data_root)
    compiled = _train(str(tmp_path / 'compiled'), data_root, '--compile', backend)
    assert "compile: torch.compile({'fullgraph': True, 'dynamic': False, 'backend': 'aot_eager'})" in compiled
    assert 'torch.compile(' not in plain and 'Model has been "compiled"' not in compiled  # not MMEngine's too
    assert 'mIoU' in compiled  # the validation after the last iteration ran (eagerly, CompileHook's stance)
    losses = [dict(LOSS.findall(out)) for out in (plain, compiled)]
    assert set(losses[0]) == set(losses[1]) == {'1', '2'}, compiled[-3000:]
    for it in ('1', '2'):
        assert abs(float(losses[0][it]) - float(losses[1][it])) <= 1e-3 * max(1.0, float(losses[0][it]))


def test_config_compile_setting_is_cuda_only_and_moves_into_the_hook():
    from mmengine.config import Config

    from beit_mm.engine.hooks.compile import CompileHook, use_compile_hook
    cfg = Config(dict(compile=dict(scope='model', devices=['cuda']), custom_hooks=[dict(type='X')]))
    use_compile_hook(cfg)
    assert cfg.compile is False  # MMEngine's own compilation of train_step stays off
    assert cfg.custom_hooks[-1] == dict(type='beit_mm.CompileHook', scope='model', devices=('cuda', ))
    cfg = Config(dict(compile=dict(scope='blocks', devices=['cuda'])))
    use_compile_hook(cfg, backend='aot_eager')  # --compile: every device, the config's scope kept
    assert cfg.custom_hooks == [dict(type='beit_mm.CompileHook', scope='blocks', devices=('cpu', 'cuda'),
                                     backend='aot_eager')]
    cfg = Config(dict(compile=False))
    use_compile_hook(cfg)
    assert not cfg.get('custom_hooks')
    assert CompileHook(devices=['cuda']).devices == ('cuda', )
