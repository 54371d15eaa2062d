"""tools/train.py, tools/test.py, tools/dist_train.sh, torch >= 2.6 checkpoint loading, resume, CPU AMP and CPU DDP,
on the tiny BEiT + UPerNet config and demo ADE20K data: resume restores model and optimizer exactly; test.py repeats
the logged validation within 0.01 points; ``weights_only`` loading needs ``register_checkpoint_safe_globals``; one
bf16 ``AmpOptimWrapper`` step within 2e-2 of fp32's."""
import copy
import glob
import os
import os.path as osp
import pickle
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS
from mmengine.runner import CheckpointLoader, Runner

from beit_mm.apis import CheckpointFileError
from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.engine.resume import set_resume
from beit_mm.engine import amp_optim_wrapper
from beit_mm.engine.run_options import enable_amp
from beit_mm.engine.amp_optim_wrapper import cpu_has_native_bf16
from beit_mm.fileio.safe_globals import checkpoint_safe_globals, register_checkpoint_safe_globals
from beit_mm.engine.launch import adapt_cfg_to_launcher

from ..conftest import ROOT, load_tool, run_tool

CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
METRICS = re.compile(r'Iter\((val|test)\).*?aAcc: ([\d.]+)\s+mIoU: ([\d.]+)\s+mAcc: ([\d.]+)')


def _data_options(data_root: str) -> list:
    return [f'{loader}.dataset.data_root={data_root}' for loader in ('train_dataloader', 'val_dataloader',
                                                                        'test_dataloader')]


def _run(cmd: list, cwd: str, timeout: int = 300) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
               PYTHON=sys.executable)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f'{" ".join(cmd)} exited {proc.returncode}:\n{output[-6000:]}'
    return output


def _metrics(output: str, mode: str) -> tuple:
    found = [tuple(float(v) for v in m[1:]) for m in METRICS.findall(output) if m[0] == mode]
    assert found, f'no {mode} metrics (aAcc/mIoU/mAcc) in the output:\n{output[-3000:]}'
    return found[-1]


@pytest.fixture(scope='module')
def demo_root(tmp_path_factory) -> str:
    return make_demo_ade20k(str(tmp_path_factory.mktemp('data') / 'ade_demo'), num_train=8, num_val=2, size=96)


@pytest.fixture(scope='module')
def trained(tmp_path_factory, demo_root) -> tuple:
    """tools/train.py: 4 iterations, checkpoints at 2 and 4, validation after 4. Returns (work_dir, output)."""
    work_dir = str(tmp_path_factory.mktemp('train'))
    output = _run([sys.executable, osp.join(ROOT, 'tools', 'train.py'), CONFIG, '--work-dir', work_dir,
                   '--cfg-options', *_data_options(demo_root)], cwd=work_dir)
    return work_dir, output


def _cfg(demo_root: str, work_dir: str, **overrides) -> Config:
    cfg = Config.fromfile(CONFIG)
    cfg.merge_from_dict({f'{loader}.dataset.data_root': demo_root
                         for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')})
    cfg.work_dir = work_dir
    cfg.update(overrides)
    return cfg


def test_train_writes_checkpoints_and_validates(trained):
    work_dir, output = trained
    for name in ('iter_2.pth', 'iter_4.pth', 'last_checkpoint'):
        assert osp.exists(osp.join(work_dir, name)), name
    assert 'Iter(train) [4/4]' in output
    assert 'Distributed training is not used, all SyncBatchNorm' in output  # SyncBN -> BN for one process
    aacc, miou, macc = _metrics(output, 'val')
    assert 0 <= miou <= 100 and 0 < aacc <= 100


def _global_name(entry) -> str:
    return entry[1] if isinstance(entry, tuple) else f'{entry.__module__}.{entry.__qualname__}'


def test_runner_checkpoint_loads_with_weights_only(trained):
    """Without the allow-list torch refuses the runner checkpoint; with it the checkpoint loads (torch.load and
    MMEngine's CheckpointLoader); and each listed object that the checkpoint references is needed."""
    path = osp.join(trained[0], 'iter_2.pth')
    allowed = checkpoint_safe_globals()
    numpy_core = np.ndarray(0).__reduce__()[0].__module__  # numpy.core.multiarray (numpy 1) or numpy._core...
    required = {'mmengine.logging.history_buffer.HistoryBuffer', 'builtins.getattr', f'{numpy_core}._reconstruct',
                f'{numpy_core}.scalar', 'numpy.ndarray', 'numpy.dtype', 'numpy.dtypes.Float64DType',
                'numpy.dtypes.Int64DType'}
    assert required <= {_global_name(g) for g in allowed}
    torch.serialization.clear_safe_globals()
    try:
        with pytest.raises(pickle.UnpicklingError, match='HistoryBuffer'):
            torch.load(path, map_location='cpu', weights_only=True)
        for entry in allowed:
            if _global_name(entry) in required:
                torch.serialization.clear_safe_globals()
                torch.serialization.add_safe_globals([g for g in allowed if g is not entry])
                with pytest.raises(pickle.UnpicklingError):
                    torch.load(path, map_location='cpu', weights_only=True)
        torch.serialization.clear_safe_globals()
        register_checkpoint_safe_globals()
        ckpt = torch.load(path, map_location='cpu', weights_only=True)
        unsafe = torch.load(path, map_location='cpu', weights_only=False)
        loss, unsafe_loss = (c['message_hub']['log_scalars']['train/loss'] for c in (ckpt, unsafe))
        assert ckpt['meta']['iter'] == 2 and isinstance(loss, HistoryBuffer)
        assert loss.mean() == unsafe_loss.mean() and loss.statistics('max') == unsafe_loss.max()
        # MMEngine's own loader (torch.load without weights_only, i.e. weights_only=True on torch >= 2.6)
        assert CheckpointLoader.load_checkpoint(path, map_location='cpu')['meta']['iter'] == 2
    finally:
        torch.serialization.clear_safe_globals()
        register_checkpoint_safe_globals()


class _Payload:
    """Stands for any class a checkpoint could smuggle in."""

    def __reduce__(self):
        return (print, ('arbitrary code ran',))


class _Plain:
    pass


class _GetattrPayload:

    def __reduce__(self):
        return (getattr, (HistoryBuffer, '__init__'))


def test_arbitrary_pickles_still_refused(tmp_path):
    """Other classes, functions and getattr targets stay refused with beit_mm's allow-list in place."""
    evil_getattr = tmp_path / 'getattr.pth'
    with open(evil_getattr, 'wb') as f:  # getattr(HistoryBuffer, '__init__'), as torch.save would pickle it
        pickle.dump({'m': _GetattrPayload()}, f, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="refuses getattr"):
        torch.load(str(evil_getattr), weights_only=True)
    for i, obj in enumerate((_Payload(), _Plain())):
        path = str(tmp_path / f'evil_{i}.pth')
        torch.save({'state_dict': {'w': torch.zeros(1)}, 'extra': obj}, path)
        with pytest.raises(pickle.UnpicklingError, match='Weights only load failed'):
            torch.load(path, weights_only=True)
        # MMEngine's loader of local files is beit_mm's opener (beit_mm.fileio): a named refusal
        with pytest.raises(CheckpointFileError, match=r'holds pickled Python objects that safe loading '
                           r'\(weights_only=True\) refuses.*Weights only load failed'):
            CheckpointLoader.load_checkpoint(path, map_location='cpu')


class _StateRecorder(Hook):
    """Records the iteration counter and the model/optimizer state when training starts and the counter at the end."""

    def before_train(self, runner) -> None:
        self.start_iter = runner.iter
        self.start_model = {k: v.detach().clone() for k, v in runner.model.state_dict().items()}
        self.start_optim = copy.deepcopy(runner.optim_wrapper.state_dict())
        self.iters = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.iters.append(runner.iter)

    def after_train(self, runner) -> None:
        self.end_iter = runner.iter


def test_resume_continues_from_saved_state(trained, demo_root, tmp_path):
    """``--resume iter_2.pth`` (``set_resume``, then the Runner): starts at iteration 2 with exactly the
    saved weights and optimizer state, and ends at 4."""
    ckpt_path = osp.join(trained[0], 'iter_2.pth')
    cfg = _cfg(demo_root, str(tmp_path), experiment_name='resume_test', val_cfg=None, val_dataloader=None,
               val_evaluator=None)
    set_resume(cfg, ckpt_path)
    assert cfg.resume and cfg.load_from == ckpt_path
    runner = Runner.from_cfg(cfg)
    recorder = _StateRecorder()
    runner.register_hook(recorder)
    runner.train()

    assert recorder.start_iter == 2 and recorder.iters == [2, 3] and recorder.end_iter == 4
    saved = torch.load(ckpt_path, map_location='cpu', weights_only=True)
    assert saved['state_dict'].keys() == recorder.start_model.keys()
    for key, value in saved['state_dict'].items():
        assert torch.equal(value, recorder.start_model[key]), key
    saved_state, start_state = saved['optimizer']['state'], recorder.start_optim['state']
    assert saved_state.keys() == start_state.keys() and len(saved_state) > 0
    for index, state in saved_state.items():
        for name in ('step', 'exp_avg', 'exp_avg_sq'):
            assert torch.equal(torch.as_tensor(state[name]), torch.as_tensor(start_state[index][name])), (index, name)
    assert osp.exists(osp.join(str(tmp_path), 'iter_4.pth'))


def test_auto_resume_and_load_from(trained, demo_root, tmp_path):
    """``--resume`` without a value picks work_dir/last_checkpoint (or starts fresh, keeping ``load_from``);
    ``load_from`` loads the weights exactly with the iteration counter at 0."""
    cfg = _cfg(demo_root, trained[0])
    set_resume(cfg, 'auto')
    assert cfg.resume and cfg.load_from == osp.join(trained[0], 'iter_4.pth')
    fresh = _cfg(demo_root, str(tmp_path), load_from='pretrained.pth')
    set_resume(fresh, 'auto')
    assert not fresh.resume and fresh.load_from == 'pretrained.pth'

    ckpt_path = osp.join(trained[0], 'iter_4.pth')
    runner = Runner.from_cfg(_cfg(demo_root, str(tmp_path), load_from=ckpt_path, experiment_name='load_from_test'))
    runner.load_or_resume()
    assert runner.iter == 0
    saved = torch.load(ckpt_path, map_location='cpu', weights_only=True)['state_dict']
    for key, value in runner.model.state_dict().items():
        assert torch.equal(value, saved[key]), key


def test_parse_args_local_rank_spellings(monkeypatch):
    train_tool = load_tool('tools/train.py')
    for flag in ('--local-rank', '--local_rank'):
        monkeypatch.delenv('LOCAL_RANK', raising=False)
        monkeypatch.setattr(sys, 'argv', ['train.py', CONFIG, flag, '3', '--resume'])
        args = train_tool.parse_args()
        assert args.local_rank == 3 and os.environ['LOCAL_RANK'] == '3' and args.resume == 'auto'
    monkeypatch.setenv('LOCAL_RANK', '1')  # torchrun's value wins
    monkeypatch.setattr(sys, 'argv', ['train.py', CONFIG, '--resume', 'a.pth'])
    assert train_tool.parse_args().resume == 'a.pth' and os.environ['LOCAL_RANK'] == '1'


def test_tools_test_matches_validation_and_draws(trained, demo_root, tmp_path):
    work_dir, train_output = trained
    show_dir, out_dir = str(tmp_path / 'show'), str(tmp_path / 'out')
    output = _run([sys.executable, osp.join(ROOT, 'tools', 'test.py'), CONFIG, osp.join(work_dir, 'iter_4.pth'),
                   '--work-dir', str(tmp_path / 'test'), '--show-dir', show_dir, '--out', out_dir, '--cfg-options',
                   'default_hooks.visualization.interval=50',  # the configs' value: --show-dir still draws each image
                   *_data_options(demo_root)], cwd=str(tmp_path))
    val, test = _metrics(train_output, 'val'), _metrics(output, 'test')
    assert all(abs(a - b) <= 0.01 for a, b in zip(val, test)), (val, test)
    overlays = [f for _, _, files in os.walk(show_dir) for f in files if f.endswith('.png')]
    assert len(overlays) == 2, overlays
    assert sorted(os.listdir(out_dir)) == ['.beit_mm_output.json', 'ADE_val_00000001.png', 'ADE_val_00000002.png']


def test_test_in_the_training_work_dir_keeps_its_config_dump(trained, demo_root, tmp_path):
    """tools/test.py in the training's work dir (its default: work_dirs/<config name>) leaves the training's config dump
    as it was and dumps its own config into its log dir; a new training there (--overwrite) is not refused."""
    work_dir = str(tmp_path / 'run')
    shutil.copytree(trained[0], work_dir)
    dump = osp.join(work_dir, osp.basename(CONFIG))
    with open(dump, 'rb') as f:
        before = f.read()
    tested = run_tool(['tools/test.py', CONFIG, osp.join(work_dir, 'iter_4.pth'), '--work-dir', work_dir,
                       '--cfg-options', *_data_options(demo_root)], cwd=str(tmp_path))
    assert tested.returncode == 0, tested.stderr[-3000:]
    with open(dump, 'rb') as f:
        assert f.read() == before
    assert len(glob.glob(osp.join(work_dir, '*', osp.basename(CONFIG)))) == 1  # the test's, in its log dir
    again = run_tool(['tools/train.py', CONFIG, '--work-dir', work_dir, '--overwrite', '--cfg-options',
                      'train_cfg.max_iters=1', 'train_cfg.val_interval=100', *_data_options(demo_root)],
                     cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the CPU adaptation; GPU runs keep the config')
def test_adapt_cfg_to_launcher_on_cpu(demo_root):
    cfg = _cfg(demo_root, 'unused')
    adapt_cfg_to_launcher(cfg, 'none')
    assert cfg.launcher == 'none' and cfg.model.neck.norm_cfg.type == 'SyncBN'  # the Runner reverts it
    adapt_cfg_to_launcher(cfg, 'pytorch')
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert cfg.model.neck.norm_cfg.type == 'BN' and cfg.model.decode_head.norm_cfg.type == 'BN'
    assert cfg.model_wrapper_cfg.device_ids is None and cfg.model_wrapper_cfg.type == 'MMDistributedDataParallel'


def test_two_process_gloo_training(demo_root, tmp_path):
    """tools/dist_train.sh with 2 processes on CPU: nccl -> gloo, SyncBN -> BN, a CPU DDP wrapper; 2 iterations
    with --amp (bf16 autocast on CPU; on a GPU machine this runs with NCCL and the GPU's AMP dtype)."""
    work_dir = str(tmp_path / 'dist')
    output = _run(['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), CONFIG, '2', '--work-dir', work_dir, '--amp',
                   '--cfg-options', 'train_cfg.max_iters=2', 'train_cfg.val_interval=100',
                   *_data_options(demo_root)], cwd=str(tmp_path))
    if not torch.cuda.is_available():
        assert "backend 'nccl' -> 'gloo'" in output
        assert ("'dtype': 'bfloat16'" in output) == cpu_has_native_bf16()  # else fp32 (tests/engine/test_amp_choice.py)
    assert re.search(r'world_size:\s*2', output) or 'Distributed launcher: pytorch' in output, output[-3000:]
    assert 'Iter(train) [2/2]' in output
    assert torch.load(osp.join(work_dir, 'iter_2.pth'), map_location='cpu', weights_only=True)['meta']['iter'] == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason='the check is for nodes without CUDA')
def test_dist_train_refuses_more_cpu_processes_than_cores(tmp_path):
    """``bash tools/dist_train.sh CONFIG 8`` on a 2-core machine without CUDA started 8 processes sharing 2 cores
    (eta 2.5 hours for the demo), without a word; now it is refused before torchrun starts (issue 49)."""
    cores = len(os.sched_getaffinity(0))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), PYTHON=sys.executable)
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), CONFIG, str(cores + 6),
                           '--work-dir', str(tmp_path / 'never')], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f'{cores + 6} processes asked for on a node without CUDA, which has {cores} usable CPU core(s)' in proc.stderr
    assert f'bash tools/dist_train.sh CONFIG {cores}' in proc.stderr and 'torch.distributed' not in proc.stderr
    assert not osp.exists(tmp_path / 'never')


def test_amp_bf16_step_on_cpu(monkeypatch):
    cfg = Config(dict(optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1))))
    monkeypatch.setattr(amp_optim_wrapper, 'cpu_has_native_bf16', lambda: True)  # fp32 otherwise: test_amp_choice
    enable_amp(cfg)
    expected = 'float16' if torch.cuda.is_available() and not torch.cuda.is_bf16_supported() else 'bfloat16'
    assert cfg.optim_wrapper.type == 'beit_mm.AmpOptimWrapper' and cfg.optim_wrapper.dtype == expected
    if torch.cuda.is_available():
        return  # the step below checks the CPU path

    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    wrappers = [
        OptimWrapper(optimizer=torch.optim.SGD(models[0].parameters(), lr=0.1)),
        OPTIM_WRAPPERS.build(
            dict(type='beit_mm.AmpOptimWrapper', dtype='bfloat16', clip_grad=dict(max_norm=10.0),
                 optimizer=torch.optim.SGD(models[1].parameters(), lr=0.1))),
    ]
    dtypes = []
    for model, wrapper in zip(models, wrappers):
        with wrapper.optim_context(model):
            out = model(x)
            dtypes.append(out.dtype)
            loss = ((out.float() - y)**2).mean()
        wrapper.update_params(loss)
    assert dtypes == [torch.float32, torch.bfloat16]
    for (name, p32), p16 in zip(models[0].named_parameters(), models[1].parameters()):
        assert p16.dtype == torch.float32
        assert (p32 - p16).abs().max() <= 2e-2, name
    assert wrappers[1].state_dict()['loss_scaler'] == {}  # bf16: no loss scaling
    with pytest.raises(ValueError, match='bfloat16 only'):
        OPTIM_WRAPPERS.build(dict(type='beit_mm.AmpOptimWrapper', dtype='float16',
                                  optimizer=torch.optim.SGD(models[1].parameters(), lr=0.1)))
