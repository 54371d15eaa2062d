"""SIGKILL and ``--resume`` lose nothing: the final weights equal an uninterrupted run's bit for bit (``torch.equal``).

Runs ``tools/train.py`` (and ``tools/dist_train.sh`` with 2 gloo processes) on the tiny BEiT + UPerNet config
``tests/configs/tiny_beit_upernet_ade_demo.py`` with deterministic settings: ``randomness.seed=0``,
``randomness.deterministic=True``, ``num_workers=0``, ``OMP_NUM_THREADS=1`` for every run, no validation, a checkpoint
every 2 iterations.

The kill points are deterministic (``tests/support/kill_points.py``, test support only: the run creates a marker
file and sleeps there, the test SIGKILLs it), so the test does not depend on the machine's speed.

Single process (10 iterations): run A uninterrupted; run B killed in the middle of writing ``iter_4.pth`` (half of its
bytes in ``iter_4.pth.beit_mm.part``); ``--resume`` must start from ``iter_2.pth`` (the last complete one) and delete the
``.part`` leftover; that run is SIGKILLed mid-run, after iteration 7's optimizer step and before anything saves it
(``iter_6.pth`` is the last checkpoint); a second ``--resume`` finishes from ``iter_6.pth``. Its ``iter_10.pth`` must
equal A's, every tensor of the state dict.
2 processes (6 iterations, ``tools/dist_train.sh``): uninterrupted vs. SIGKILL of the whole process group (torchrun
and both workers) after iteration 3's step, then ``--resume`` from ``iter_2.pth``.

The single-process test runs two recipes, the 2-process one the second: ``plain`` (the config as written: no
randomness in the training step, no validation) and ``drop_path`` (drop path 0.1 in the backbone, dropout 0.1 in the
head, validation every 2 iterations): the resumed
runs must restore every process's generator states from the checkpoint (``beit_mm.RNGStateHook``, added by
``tools/train.py``), after MMEngine's replay of the finished iterations' batches, and validation must leave them as it
found them; without either, 139 of the 152 tensors differ.

What determinism needs here (docs/faults.md): the seed (the sampler order and every transform draw come from it;
MMEngine replays the sampler by loading the skipped batches again, and ``--resume`` takes the checkpoint's seed),
deterministic algorithms, ``num_workers=0`` (or seeded workers), the same thread count and number of processes, and
the generator states in the checkpoints.
"""
import os
import os.path as osp
import signal
import subprocess
import sys
import time

import pytest
import torch

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.fileio.checkpoint import is_complete_checkpoint
from beit_mm.fileio.outputs import PARTIAL_SUFFIX

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
SLOW_BACKEND = 'beit_mm_test_slow_write'


# The recipes the kill/resume tests run: ``plain`` has no randomness in the training step; ``drop_path`` draws drop
# path (0.1, as BEiT-B's recipes) and dropout masks from torch's generator in every step and validates every 2
# iterations (the validation dataloader draws a seed from the same generator): exact only with the generator states
# in the checkpoints (beit_mm.RNGStateHook).
RECIPES = {
    'plain': ['val_cfg=None', 'val_dataloader=None', 'val_evaluator=None'],
    'drop_path': ['model.backbone.drop_path_rate=0.1', 'model.decode_head.dropout_ratio=0.1',
                  'train_cfg.val_interval=2'],
}


def _options(data_root: str, iters: int, recipe: str = 'plain') -> list:
    val_root = [] if recipe == 'plain' else [f'val_dataloader.dataset.data_root={data_root}']
    return ['--cfg-options', 'randomness.seed=0', 'randomness.deterministic=True', f'train_cfg.max_iters={iters}',
            *RECIPES[recipe], 'default_hooks.checkpoint.interval=2',
            'default_hooks.checkpoint.max_keep_ckpts=2', 'default_hooks.visualization.interval=1000',
            f'train_dataloader.dataset.data_root={data_root}', *val_root]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
                PYTHON=sys.executable)


def _finish(proc: subprocess.Popen, log: str, timeout: int = 900) -> str:
    proc.wait(timeout=timeout)
    with open(log) as f:
        text = f.read()
    assert proc.returncode == 0, f'{" ".join(proc.args)} exited {proc.returncode}:\n{text[-5000:]}'
    return text


def _launch(cmd: list, cwd: str) -> tuple:
    os.makedirs(cwd, exist_ok=True)
    log = osp.join(cwd, f'run_{time.monotonic_ns()}.log')
    with open(log, 'w') as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _wait_for(predicate, proc: subprocess.Popen, log: str, timeout: float = 900) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            with open(log) as f:
                raise AssertionError(f'the run ended (exit {proc.returncode}) before the kill point:\n'
                                     f'{f.read()[-5000:]}')
        assert time.monotonic() < end, 'timed out waiting for the kill point'
        time.sleep(0.02)


def _descendants(pid: int) -> list:
    """Process ids of all descendants of ``pid`` (from /proc; torchrun starts its workers in sessions of their own)."""
    children: dict = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run and every process it started (launcher and workers), like a lost node."""
    for pid in [proc.pid, *_descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _last(work_dir: str) -> str:
    try:
        with open(osp.join(work_dir, 'last_checkpoint')) as f:
            return osp.basename(f.read().strip())
    except FileNotFoundError:
        return ''


def _weights(path: str) -> dict:
    return torch.load(path, map_location='cpu', weights_only=True)['state_dict']


def _assert_bit_identical(a: str, b: str) -> int:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    different = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert not different, f'{len(different)} of {len(wa)} tensors differ, e.g. {different[:5]}'
    return len(wa)


@pytest.fixture(scope='module')
def data_root(tmp_path_factory) -> str:
    return make_demo_ade20k(str(tmp_path_factory.mktemp('data') / 'ade_demo'), num_train=8, num_val=2, size=96)


def _config(tmp_path, name: str, body: str) -> str:
    """A config = the tiny config + the test-support kill points (tests/support/kill_points.py) + ``body``."""
    path = tmp_path / f'{name}.py'
    path.write_text(f"_base_ = [{CONFIG!r}]\n"
                    "custom_imports = dict(imports=['beit_mm', 'tests.support.kill_points'], "
                    "allow_failed_imports=False)\n" + body)
    return str(path)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_kill_during_save_and_mid_run_then_resume_is_bit_identical(data_root, tmp_path, recipe):
    iters = 10
    train = [sys.executable, osp.join(ROOT, 'tools', 'train.py')]
    slow_save = _config(tmp_path, 'slow_save', "default_hooks = dict(checkpoint=dict(backend_args=dict("
                        f"backend={SLOW_BACKEND!r}, slow_name='iter_4.pth')))\n")
    pause_7 = _config(tmp_path, 'pause_7', "custom_hooks = [dict(type='beit_mm.PauseAtIterationHook', iteration=7)]\n")
    ref_dir, work_dir = str(tmp_path / 'reference'), str(tmp_path / 'killed')
    start = time.monotonic()
    # A (uninterrupted) and B (killed while writing iter_4.pth) run side by side
    options = _options(data_root, iters, recipe)
    ref, ref_log = _launch([*train, CONFIG, '--work-dir', ref_dir, *options], ref_dir)
    slow, slow_log = _launch([*train, slow_save, '--work-dir', work_dir, *options], work_dir)
    part = osp.join(work_dir, 'iter_4.pth' + PARTIAL_SUFFIX)
    _wait_for(lambda: osp.exists(part + '.halfway'), slow, slow_log)
    _kill(slow)
    assert not osp.exists(osp.join(work_dir, 'iter_4.pth')) and not is_complete_checkpoint(part)
    assert _last(work_dir) == 'iter_2.pth' and is_complete_checkpoint(osp.join(work_dir, 'iter_2.pth'))

    # --resume starts from iter_2.pth; killed mid-run: iteration 7 stepped, not saved (iter_6.pth is the last)
    resumed, resumed_log = _launch([*train, pause_7, '--work-dir', work_dir, '--resume', *options], work_dir)
    _wait_for(lambda: osp.exists(osp.join(work_dir, 'paused_at_7')), resumed, resumed_log)
    _kill(resumed)
    with open(resumed_log) as f:
        text = f.read()
    assert f'iter_4.pth{PARTIAL_SUFFIX}: an unfinished checkpoint write of a killed run' in text
    assert 'resumed epoch: 0, iter: 2' in text, text[-3000:]
    assert 'random generator states of iteration 2 restored (rank 0)' in text, text[-3000:]
    assert _last(work_dir) == 'iter_6.pth'
    assert sorted(f for f in os.listdir(work_dir) if f.endswith('.pth')) == ['iter_4.pth', 'iter_6.pth']

    final, final_log = _launch([*train, CONFIG, '--work-dir', work_dir, '--resume', *options], work_dir)
    text = _finish(final, final_log)
    assert 'resumed epoch: 0, iter: 6' in text, text[-3000:]
    assert 'random generator states of iteration 6 restored (rank 0)' in text, text[-3000:]
    _finish(ref, ref_log)
    n = _assert_bit_identical(osp.join(ref_dir, f'iter_{iters}.pth'), osp.join(work_dir, f'iter_{iters}.pth'))
    print(f'single process: {n} tensors bit-identical after kill-in-save + kill-mid-run + 2 resumes '
          f'({time.monotonic() - start:.0f} s)')


@pytest.mark.parametrize('recipe', ['drop_path'])  # the recipe with randomness and validation (3 launches, ~3 min)
def test_two_process_gloo_kill_and_resume_is_bit_identical(data_root, tmp_path, recipe):
    iters = 6
    dist = ['bash', osp.join(ROOT, 'tools', 'dist_train.sh')]
    pause_3 = _config(tmp_path, 'pause_3', "custom_hooks = [dict(type='beit_mm.PauseAtIterationHook', iteration=3)]\n")
    ref_dir, work_dir = str(tmp_path / 'reference'), str(tmp_path / 'killed')
    start = time.monotonic()
    options = _options(data_root, iters, recipe)
    ref, ref_log = _launch([*dist, CONFIG, '2', '--work-dir', ref_dir, *options], ref_dir)
    killed, killed_log = _launch([*dist, pause_3, '2', '--work-dir', work_dir, *options], work_dir)
    _wait_for(lambda: osp.exists(osp.join(work_dir, 'paused_at_3')), killed, killed_log)
    _kill(killed)  # bash, torchrun and both workers
    assert _last(work_dir) == 'iter_2.pth'
    final, final_log = _launch([*dist, CONFIG, '2', '--work-dir', work_dir, '--resume', *options], work_dir)
    text = _finish(final, final_log)
    assert "backend 'nccl' -> 'gloo'" in text or torch.cuda.is_available()
    assert 'resumed epoch: 0, iter: 2' in text, text[-3000:]
    assert 'random generator states of iteration 2 restored (rank 0)' in text, text[-3000:]
    _finish(ref, ref_log)
    n = _assert_bit_identical(osp.join(ref_dir, f'iter_{iters}.pth'), osp.join(work_dir, f'iter_{iters}.pth'))
    print(f'2 processes (gloo): {n} tensors bit-identical after SIGKILL + resume ({time.monotonic() - start:.0f} s)')
