"""FSDP (MMEngine FlexibleRunner + FSDPStrategy) on 2 CPU processes with gloo, for a tiny stand-in of
configs/beit/beit-large_upernet_8xb1-amp-fsdp-160k_ade20k-640x640.py (only sizes shrunk, as test_configs.py does):
train 2 iterations and save, resume to 4; the layer-decay param groups in the saved (full) optimizer state are the ones
LayerDecayOptimWrapperConstructor builds without FSDP; each rank holds about half the parameters a DDP rank would hold
(the whole model; printed with the optimizer state and peak RSS by tests/memory_probe.py)."""
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config

from ..conftest import ROOT, free_port, shrink_seg_config

FSDP_CONFIG = osp.join(ROOT, 'configs/beit/beit-large_upernet_8xb1-amp-fsdp-160k_ade20k-640x640.py')
DIM = 32
PROBE = re.compile(r'memory-probe rank=(\d) params=(\d+) optim_state=(\d+) peak_rss_mib=(\d+)')


def _tiny(cfg: Config, data_root: str, ckpt: str, work_dir: str) -> Config:
    cfg.model.backbone.arch = dict(embed_dims=DIM, num_layers=4, num_heads=2, mlp_ratio=2.0)
    cfg.model.backbone.out_indices = (0, 1, 2, 3)
    cfg.model.backbone.drop_path_rate = 0.0
    cfg.model.neck.embed_dim = DIM
    cfg.model.decode_head.in_channels = [DIM] * 4
    cfg.model.decode_head.channels = 16
    cfg.model.auxiliary_head.in_channels = DIM
    cfg.model.auxiliary_head.channels = 16
    cfg = shrink_seg_config(cfg, data_root, ckpt, work_dir, crop=64)
    cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=4)]
    cfg.train_cfg.val_interval = 100
    cfg.custom_imports = dict(imports=cfg.custom_imports['imports'] + ['tests.memory_probe'], allow_failed_imports=False)
    cfg.custom_hooks = [dict(type='beit_mm.MemoryProbeHook')]
    if 'strategy' in cfg and not torch.cuda.is_available():
        # what the config's header says for CPU runs: an explicit CPU device, no CPU offload of the full state dict
        # (torch 2.13 FSDP on gloo: offload_to_cpu=True segfaults rank 0 while gathering it)
        cfg.strategy.model_wrapper.device_id = 'cpu'
        cfg.strategy.state_dict_cfg.state_dict_config.offload_to_cpu = False
        cfg.strategy.state_dict_cfg.optim_state_dict_config.offload_to_cpu = False
    return cfg


def _dist_train(cfg_path: str, cwd: str, *args: str, fails: bool = False) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), PYTHON=sys.executable,
               OMP_NUM_THREADS='1')
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), cfg_path, '2', *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert (proc.returncode != 0) == fails, out[-6000:]
    return out


def _probe(out: str) -> dict:
    found = {int(r): tuple(int(v) for v in rest) for r, *rest in PROBE.findall(out)}
    assert sorted(found) == [0, 1], out[-3000:]
    return found


@pytest.fixture(scope='module')
def setup(tmp_path_factory, ade_demo_root):
    tmp = tmp_path_factory.mktemp('fsdp')
    cfg = Config.fromfile(FSDP_CONFIG)
    backbone_cfg = Config(dict(model=dict(type='beit_mm.BEiT', arch=dict(embed_dims=DIM, num_layers=4, num_heads=2,
                                                                          mlp_ratio=2.0),
                                          img_size=64, patch_size=16)))
    ckpt = str(tmp / 'backbone.pth')
    torch.save({'state_dict': build_from_config(backbone_cfg).state_dict()}, ckpt)
    return tmp, ade_demo_root, ckpt


def _dump(cfg: Config, path) -> str:
    cfg.dump(str(path))
    return str(path)


def test_fsdp_train_save_resume_keeps_layer_decay_groups(setup):
    from beit_mm.engine.optimizers.layer_decay import LayerDecayOptimWrapperConstructor
    tmp, data_root, ckpt = setup
    work = str(tmp / 'fsdp')
    cfg = _tiny(Config.fromfile(FSDP_CONFIG), data_root, ckpt, work)
    assert cfg.runner_type == 'FlexibleRunner' and cfg.strategy.type == 'TorchFSDPStrategy'
    path = _dump(cfg, tmp / 'fsdp_tiny.py')
    out = _dist_train(path, str(tmp))
    assert 'Iter(train) [2/2]' in out, out[-3000:]
    fsdp_probe = _probe(out)

    saved = torch.load(osp.join(work, 'iter_2.pth'), map_location='cpu', weights_only=False)
    groups = saved['optimizer']['param_groups']
    # the groups the constructor builds on the same model without FSDP
    model = build_from_config(Config.fromfile(path))
    ref = LayerDecayOptimWrapperConstructor(dict(type='OptimWrapper', optimizer=cfg.optim_wrapper.optimizer),
                                            cfg.optim_wrapper.paramwise_cfg)(model).optimizer.param_groups
    assert len(groups) == len(ref) > 5
    for g, r in zip(groups, ref):
        assert (g['layer_id'], g['weight_decay'], g['lr_scale']) == (r['layer_id'], r['weight_decay'], r['lr_scale'])
        assert sorted(n.replace('_fsdp_wrapped_module.', '') for n in g['params']) == sorted(r['param_names'])
    # one scheduler factor for every group (LinearLR warm-up, saved mid-way): the layer-decay lr ratios are intact
    factors = {round(g['lr'] / r['lr'], 9) for g, r in zip(groups, ref)}
    assert len(factors) == 1 and 0.5 < factors.pop() < 1
    # the full model state dict loads into the unwrapped model
    model.load_state_dict(saved['state_dict'], strict=True)

    # FlexibleRunner builds its model only in train(): the start check runs on the config's model built for it, so a checkpoint of other shapes is named before the run (it was skipped: FSDP loaded it or failed deep inside)
    other = dict(saved, state_dict={k: (v[..., :1] if k.endswith('cls_token') else v) for k, v in saved['state_dict'].items()})
    torch.save(other, str(tmp / 'other_shapes.pth'))
    out = _dist_train(path, str(tmp), '--resume', str(tmp / 'other_shapes.pth'), '--overwrite', '--cfg-options',
                      'train_cfg.max_iters=4', fails=True)
    assert out.count('does not fit the model') == 1 and 'cls_token' in out, out[-3000:]

    out = _dist_train(path, str(tmp), '--resume', osp.join(work, 'iter_2.pth'),
                      '--cfg-options', 'train_cfg.max_iters=4')
    assert re.search(r'resumed .*iter: 2', out, re.I) or 'Auto resumed' in out or 'resumed epoch' in out, out[-3000:]
    assert 'Iter(train) [4/4]' in out and 'Iter(train) [1/4]' not in out
    assert 'iter_2.pth (read once, by the checks before the run)' in out, out[-3000:]  # the strategy took that read
    final = torch.load(osp.join(work, 'iter_4.pth'), map_location='cpu', weights_only=False)
    assert [g['lr_scale'] for g in final['optimizer']['param_groups']] == [g['lr_scale'] for g in groups]

    # a DDP rank holds the whole model: the FSDP ranks together hold one copy, each about half
    total = sum(p.numel() for p in model.parameters())
    fsdp_params = fsdp_probe[0][0] + fsdp_probe[1][0]
    assert fsdp_params == pytest.approx(total, rel=0.01)
    assert max(fsdp_probe[r][0] for r in (0, 1)) <= 0.55 * total
    for r in (0, 1):
        print(f'rank {r}: FSDP params {fsdp_probe[r][0]} of {total} optim_state {fsdp_probe[r][1]} '
              f'peak RSS {fsdp_probe[r][2]} MiB')


_UNILM_RULE_UNDER_FSDP = r'''
import os, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
import beit_mm
from beit_mm.engine.fsdp import transformer_block_wrap_policy
from beit_mm.engine.optimizers.layer_decay import ORIGINAL_NDIM_ATTR, LayerDecayOptimWrapperConstructor
from beit_mm.models.backbones.beit import BEiT

os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=os.environ['PORT'])
dist.init_process_group('gloo', rank=0, world_size=1)
constructor = LayerDecayOptimWrapperConstructor(
    dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05)),
    dict(layer_decay_rate=0.9, weight_decay_rule='unilm'))
def wrapped(record):
    torch.manual_seed(0)
    model = BEiT(arch=dict(embed_dims=16, num_layers=2, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=16)
    if record:  # what TorchFSDPStrategy.build_model does
        for p in model.parameters():
            setattr(p, ORIGINAL_NDIM_ATTR, p.ndim)
    return FSDP(model, auto_wrap_policy=transformer_block_wrap_policy, use_orig_params=True, device_id='cpu')
def groups(model):
    return [(g['group_name'], g['weight_decay'], sorted(n.replace('_fsdp_wrapped_module.', '')
             for n in g['param_names'])) for g in constructor(model).optimizer.param_groups]
try:
    groups(wrapped(record=False))
    print('NO ERROR')
except ValueError as err:
    print('ERROR', err)
torch.manual_seed(0)
plain = BEiT(arch=dict(embed_dims=16, num_layers=2, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=16)
print('SAME' if groups(wrapped(record=True)) == groups(plain) else 'DIFFERENT', len(groups(plain)))
dist.destroy_process_group()
'''


def test_unilm_weight_decay_rule_under_fsdp_uses_original_ndims(tmp_path):
    """unilm's rule exempts 1-D parameters (beit/optim_factory.py::get_parameter_groups, ``len(param.shape) == 1``).
    FSDP flattens every parameter into 1-D views: without the ndims recorded before wrapping the constructor must refuse
    (not exempt every weight); with them, the groups equal those of the unwrapped model."""
    script = tmp_path / 'unilm_fsdp.py'
    script.write_text(_UNILM_RULE_UNDER_FSDP)
    env = dict(os.environ, PYTHONPATH=ROOT, PORT=str(free_port()), OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'ERROR weight_decay_rule=\'unilm\'' in proc.stdout and 'TorchFSDPStrategy' in proc.stdout, proc.stdout
    assert 'SAME 6' in proc.stdout, proc.stdout  # stem, 2 blocks, head id: decay + no-decay each (stem: 2)


def test_wrap_units_are_declared_by_the_backbones():
    """The FSDP policy reads the block classes from the registered backbones (``fsdp_wrap_units``), not from a list in
    the engine: a new backbone class with its own declaration is picked up with no engine change."""
    from beit_mm.engine.fsdp import declared_wrap_units, transformer_block_wrap_policy
    from beit_mm.models.backbones.cvt import CvTBlock
    from beit_mm.models.layers.beit_block import BEiTBlock
    from beit_mm.registry import MODELS

    assert {BEiTBlock, CvTBlock} <= declared_wrap_units()
    block = BEiTBlock(16, 2, 4.0)
    assert transformer_block_wrap_policy(block, recurse=False, nonwrapped_numel=0)

    class _Unit(torch.nn.Linear):
        pass

    @MODELS.register_module(force=True)
    class _NewBackbone(torch.nn.Module):
        fsdp_wrap_units = (_Unit, )

    try:
        assert transformer_block_wrap_policy(_Unit(2, 2), recurse=False, nonwrapped_numel=0)
    finally:
        MODELS.module_dict.pop('_NewBackbone')
