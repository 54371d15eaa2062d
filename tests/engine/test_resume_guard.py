"""A resumed training checkpoint steers training state only: never files outside its run, memory, or the run's length.

Each test resumes a run (:func:`beit_mm.apis.train` in-process, or ``tools/train.py`` in a subprocess where the old
code crashed the interpreter) from a real checkpoint of the tiny BEiT + UPerNet config (2 iterations, saved by a run
itself) with one value changed the way a stranger's file could, and asserts what MMEngine 0.10.7 did with it no
longer happens:

- ``message_hub.runtime_info.best_ckpt`` naming an outside folder: ``CheckpointHook`` removed it (``rmtree``) at the
  first better validation score; the folder must survive a resumed run that saves a best checkpoint;
- ``keep_ckpt_ids`` longer than ``max_keep_ckpts``: ``CheckpointHook.before_train`` deleted ``iter_<id>.pth`` files of
  the work dir resumed into; they must survive;
- an optimizer state whose ``exp_avg`` has the wrong size (the weights fit): the fused CPU AdamW ``tools/train.py``
  turns on read and wrote out of bounds (SIGSEGV at the first step); now a named refusal;
- ``meta.iter = 10**9``: ``IterBasedTrainLoop`` replayed a billion batches (a silent hang); now refused at once;
- ``meta.seed = 2**40`` and generator states the generators refuse: raw numpy/torch/random errors; now named;
- ``--resume CKPT`` from outside into a work dir holding another run's checkpoints: the run saved over them; now
  refused without ``--overwrite`` and the files are byte-identical;
- ``resume=True`` in the config with a truncated or missing ``load_from``: raw errors; now named.

Every refusal is one line (``TrainingRefused``; ``train.py: error: ...`` or ``--resume: ...`` from the tool) naming
the file, the key and the fix.
"""
from __future__ import annotations

import os
import os.path as osp
import shutil
import signal
import subprocess
from contextlib import contextmanager

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.engine.resume import check_start_checkpoint, set_resume
from beit_mm.apis.train import TrainingRefused, train
from beit_mm.fileio import open_checkpoint

from ..conftest import load_tool, run_tool
from ..tools.test_tools import CONFIG

PARSE = load_tool('tools/train.py').parse_args  # the tool's flags -> beit_mm.apis.train's keywords


def _options(ade_demo_root: str, *extra: str) -> list[str]:
    return ['--cfg-options', *[f'{loader}.dataset.data_root={ade_demo_root}' for loader in
                               ('train_dataloader', 'val_dataloader', 'test_dataloader')], *extra]


def _train(monkeypatch, work_dir: str, *args: str) -> None:
    """``tools/train.py CONFIG --work-dir WORK_DIR ARGS`` as its one call, :func:`beit_mm.apis.train`, in this
    process."""
    options = vars(PARSE([CONFIG, '--work-dir', work_dir, *args]))
    del options['local_rank']
    train(**options)


def _refused(monkeypatch, work_dir: str, *args: str) -> str:
    """The refusal of ``tools/train.py ARGS`` (:class:`beit_mm.apis.train.TrainingRefused`, one line): its message."""
    with pytest.raises(TrainingRefused) as refused:
        _train(monkeypatch, work_dir, *args)
    message = str(refused.value)
    assert '\n' not in message and message, message
    return message


@contextmanager
def time_limit(seconds: int):
    """Fail (TimeoutError) instead of hanging when the body runs longer than ``seconds``."""
    def expire(signum, frame):
        raise TimeoutError(f'still running after {seconds} s')
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope='module')
def trained(tmp_path_factory, ade_demo_root) -> str:
    """``iter_2.pth`` of a 2-iteration ``tools/train.py`` run (RNG states, optimizer, message hub as saved)."""
    work_dir = str(tmp_path_factory.mktemp('run'))
    with pytest.MonkeyPatch.context() as monkeypatch:
        _train(monkeypatch, work_dir, *_options(ade_demo_root, 'train_cfg.max_iters=2', 'val_cfg=None',
                                                'val_dataloader=None', 'val_evaluator=None',
                                                'experiment_name=resume_guard_fixture'))
    return osp.join(work_dir, 'iter_2.pth')


def _hostile(trained: str, path: str, edit) -> str:
    """A copy of the trained checkpoint at ``path`` with ``edit(checkpoint)`` applied."""
    checkpoint = torch.load(trained, map_location='cpu', weights_only=True)
    edit(checkpoint)
    torch.save(checkpoint, path)
    return path


def _runtime_info(checkpoint: dict) -> dict:
    return checkpoint['message_hub']['runtime_info']


def test_best_ckpt_outside_the_work_dir_is_never_removed(tmp_path, monkeypatch, trained, ade_demo_root):
    victim = tmp_path / 'victim'
    victim.mkdir()
    (victim / 'thesis.tex').write_text('years of work')

    def edit(checkpoint):
        _runtime_info(checkpoint)['best_ckpt'] = str(victim)
        _runtime_info(checkpoint).pop('best_score', None)  # any score the first validation gets is better
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), edit)
    work_dir = str(tmp_path / 'work')
    _train(monkeypatch, work_dir, '--resume', hostile,
           *_options(ade_demo_root, 'train_cfg.max_iters=3', 'train_cfg.val_interval=1',
                     'default_hooks.checkpoint.save_best=mIoU'))
    assert (victim / 'thesis.tex').read_text() == 'years of work'
    assert osp.isfile(osp.join(work_dir, 'best_mIoU_iter_3.pth'))  # the run validated and saved its own best


def test_keep_ckpt_ids_never_delete_files_of_the_work_dir(tmp_path, monkeypatch, trained, ade_demo_root):
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    (work_dir / 'iter_1.pth').write_bytes(b'a checkpoint of an earlier run')

    def edit(checkpoint):
        _runtime_info(checkpoint)['keep_ckpt_ids'] = [1, 2]  # one more than max_keep_ckpts: MMEngine deleted iter_1
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), edit)
    _train(monkeypatch, str(work_dir), '--resume', hostile, '--overwrite',
           *_options(ade_demo_root, 'train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None',
                     'val_evaluator=None', 'default_hooks.checkpoint.max_keep_ckpts=1'))
    assert (work_dir / 'iter_1.pth').read_bytes() == b'a checkpoint of an earlier run'
    assert (work_dir / 'iter_3.pth').is_file()


def test_optimizer_state_of_the_wrong_size_is_refused_not_a_segfault(tmp_path, trained, ade_demo_root):
    """In a subprocess: on the old code the fused AdamW step crashed the interpreter (SIGSEGV)."""
    def edit(checkpoint):
        state = checkpoint['optimizer']['state']
        index = max(state, key=lambda i: state[i]['exp_avg'].numel())  # the largest parameter's moments
        state[index]['exp_avg'] = torch.zeros(4)
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), edit)
    proc = run_tool(['tools/train.py', CONFIG, '--work-dir', str(tmp_path / 'work'), '--resume', hostile,
                     *_options(ade_demo_root, 'train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None',
                               'val_evaluator=None')], cwd=str(tmp_path))
    assert proc.returncode == 2, f'exit {proc.returncode}:\n{proc.stderr[-3000:]}'
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith('train.py: error: ') and 'Traceback' not in proc.stderr
    assert "exp_avg" in last and '(4,)' in last and 'evil.pth' in last and 'Fix:' in last


def test_a_billion_iterations_are_refused_at_once(tmp_path, monkeypatch, trained, ade_demo_root):
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), lambda c: c['meta'].update(iter=10**9))
    with time_limit(60):  # the old code replayed 10**9 batches
        message = _refused(monkeypatch, str(tmp_path / 'work'), '--resume', hostile,
                           *_options(ade_demo_root, 'train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None',
                                     'val_evaluator=None'))
    assert 'meta.iter = 1000000000' in message and 'max_iters 3' in message and 'Fix:' in message


def test_a_huge_seed_is_refused_by_name(tmp_path, monkeypatch, trained, ade_demo_root):
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), lambda c: c['meta'].update(seed=2**40))
    message = _refused(monkeypatch, str(tmp_path / 'work'), '--resume', hostile,
                       *_options(ade_demo_root, 'train_cfg.max_iters=3'))
    assert 'evil.pth' in message and f'meta.seed = {2**40}' in message and '2**32' in message and 'Fix:' in message


@pytest.mark.parametrize('where, value, named', [
    (('torch',), torch.zeros(10, dtype=torch.uint8), r"rng_states\[0\]\['torch'\]"),
    (('python', 'state'), torch.arange(625, dtype=torch.int64) * 10**6, r"rng_states\[0\]\['python'\]\['state'\]"),
])
def test_hostile_rng_states_are_refused_by_name(tmp_path, monkeypatch, trained, ade_demo_root, where, value,
                                                named):
    def edit(checkpoint):
        node = checkpoint['rng_states'][0]
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value
    hostile = _hostile(trained, str(tmp_path / 'evil.pth'), edit)
    message = _refused(monkeypatch, str(tmp_path / 'work'), '--resume', hostile,
                       *_options(ade_demo_root, 'train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None',
                                 'val_evaluator=None'))
    assert 'evil.pth' in message and 'Fix:' in message
    assert __import__('re').search(named, message), message


def test_resume_into_another_runs_work_dir_is_refused(tmp_path, monkeypatch, trained, ade_demo_root):
    other = tmp_path / 'other_run'
    other.mkdir()
    shutil.copy(trained, other / 'iter_4.pth')  # that run's checkpoint, which a resumed run to 4 would save over
    before = (other / 'iter_4.pth').read_bytes()
    message = _refused(monkeypatch, str(other), '--resume', trained,
                       *_options(ade_demo_root, 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None'))
    assert (other / 'iter_4.pth').read_bytes() == before
    assert 'iter_4.pth' in message and '--overwrite' in message and '--work-dir' in message


@pytest.mark.parametrize('damage', ['truncated', 'missing'])
def test_config_resume_with_a_bad_load_from_is_refused_by_name(tmp_path, monkeypatch, trained, ade_demo_root,
                                                                damage):
    path = tmp_path / 'iter_2.pth'
    if damage == 'truncated':
        path.write_bytes(open(trained, 'rb').read()[:-1000])
    message = _refused(monkeypatch, str(tmp_path / 'work'),
                       *_options(ade_demo_root, 'resume=True', f'load_from={path}'))
    assert 'iter_2.pth' in message and 'Fix:' in message
    assert ('truncated' if damage == 'truncated' else 'does not exist') in message


# --- the rules, on their own (no runner) ----------------------------------------------------------------------------
@pytest.mark.parametrize('where, value, named', [
    (('numpy', 'pos'), 10**6, 'pos'),  # numpy read its key array out of bounds from there
    (('numpy', 'has_gauss'), 2, 'has_gauss'),
    (('numpy', 'keys'), torch.zeros(624, dtype=torch.int32), 'keys'),
    (('python', 'version'), 2, 'version'),
    (('python', 'gauss_next'), 'x', 'gauss_next'),
    (('cuda',), 'x', 'cuda'),
])
def test_generator_states_as_rng_state_hook_saves_them_pass_and_others_are_named(where, value, named):
    from beit_mm.engine.hooks.rng_state import capture_rng_state
    from beit_mm.engine.resume import TrainingStateError, check_rng_states
    check_rng_states([capture_rng_state(), None], 'ok.pth')  # what RNGStateHook writes, one rank unknown
    state = capture_rng_state()
    node = state
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(TrainingStateError, match=rf"evil\.pth: rng_states\[1\]\[.*'{named}'\] = .*Fix: "):
        check_rng_states([capture_rng_state(), state], 'evil.pth')


def test_file_naming_runtime_values_are_kept_only_for_the_work_dirs_own_checkpoints(tmp_path):
    from beit_mm.engine.resume import clean_runtime_info
    work, outside = tmp_path / 'work', tmp_path / 'outside'
    work.mkdir()
    outside.mkdir()
    (work / 'best_aAcc_link.pth').symlink_to(outside)
    for name in ('best_mIoU_iter_2.pth', 'iter_2.pth'):
        (work / name).write_bytes(b'checkpoint')
    (work / 'best_folder.pth').mkdir()  # a folder named as a checkpoint: MMEngine would rmtree it
    own = dict(best_ckpt=str(work / 'best_mIoU_iter_2.pth'), last_ckpt=str(work / 'iter_2.pth'), keep_ckpt_ids=[1, 2],
               best_score=0.5)
    info = dict(own, best_ckpt_aAcc=str(work / 'best_aAcc_link.pth'), best_ckpt_folder=str(work / 'best_folder.pth'),
                experiment_name='x', unknown='y')
    dropped = clean_runtime_info(info, 'evil.pth', str(work), same_run=True, last_step=2)
    assert info == own and len(dropped) == 3, dropped  # the link, the folder, the unknown key; experiment_name quietly
    hostile = dict(best_ckpt=str(work), last_ckpt=str(work / 'sub' / 'iter_2.pth'), keep_ckpt_ids=[1, 10**6])
    assert len(clean_runtime_info(hostile, 'evil.pth', str(work), same_run=True, last_step=2)) == 3 and not hostile
    foreign = dict(own)  # the same values in a checkpoint from elsewhere steer no file of this work dir
    clean_runtime_info(foreign, 'evil.pth', str(work), same_run=False, last_step=2)
    assert foreign == dict(best_score=0.5)


def test_optimizer_state_fits_its_parameters_and_groups():
    import copy

    from mmengine.optim import OptimWrapper, OptimWrapperDict

    from beit_mm.engine.resume import TrainingStateError, check_optimizer_state

    model = torch.nn.Linear(3, 2)

    def wrapper(groups=None, **options):
        return OptimWrapper(torch.optim.AdamW(groups or model.parameters(), lr=1e-3, **options))
    trained = wrapper(fused=True)
    model(torch.randn(4, 3)).sum().backward()
    trained.step()
    saved = trained.state_dict()

    def check(state, own=None):
        state = copy.deepcopy(state)
        check_optimizer_state(own or wrapper(fused=True), state, 'evil.pth')
        return state
    kernels = copy.deepcopy(saved)
    kernels['param_groups'][0].update(fused=None, foreach=True)
    assert check(kernels)['param_groups'][0]['fused'] is True  # how the step runs is this run's choice
    assert check(kernels)['param_groups'][0]['foreach'] is None
    for edit, match in [
        (lambda s: s['state'][0].update(exp_avg=torch.zeros(5)), r"state\[0\]\['exp_avg'\] = float32 tensor of "
         r'shape \(5,\): its parameter has shape \(2, 3\)'),
        (lambda s: s['state'][0].update(exp_avg_sq=torch.zeros(2, 3, dtype=torch.int64)), 'its parameter is'),
        (lambda s: s['state'][0].update(step=torch.tensor(float('nan'))), r"\['step'\]"),
        (lambda s: s['state'][0].update(exp_avg='x'), 'tensors and numbers'),
        (lambda s: s['param_groups'][0].update(amsgrad=True), r'param_groups\[0\]\.amsgrad = True.*amsgrad=False'),
        (lambda s: s['param_groups'][0].update(lr='1e-3'), r'param_groups\[0\]\.lr'),
        (lambda s: s['param_groups'][0].update(betas=(0.9,)), r'param_groups\[0\]\.betas'),
        (lambda s: s['param_groups'][0]['params'].append(7), r'3 parameters, this run.s group has 2'),
        (lambda s: s['state'].update({9: {}}), r'\.state = 9: state for a parameter id no param group'),
    ]:
        hostile = copy.deepcopy(saved)
        edit(hostile)
        with pytest.raises(TrainingStateError, match=rf'evil\.pth: optimizer.*{match}.*Fix: '):
            check(hostile)
    with pytest.raises(TrainingStateError, match=r'1 param groups, this run.s optimizer has 2'):
        check(saved, wrapper([{'params': [model.weight]}, {'params': [model.bias]}]))
    scaled = wrapper(fused=True)
    scaled.loss_scaler = torch.amp.GradScaler('cpu')  # an AmpOptimWrapper's fp16 scaler
    with pytest.raises(TrainingStateError, match=r'loss_scaler\.scale = 0\.0: expected a finite number > 0'):
        check(dict(copy.deepcopy(saved), loss_scaler=dict(scaler_state(), scale=0.0)), scaled)
    assert 'loss_scaler' not in check(dict(copy.deepcopy(saved), loss_scaler={}), scaled)  # saved by a bf16 run
    with pytest.raises(TrainingStateError, match=r"optimizer = \['other'\]: this run.s optimizers are \['main'\]"):
        check({'other': saved}, OptimWrapperDict(main=wrapper()))
    check({'main': saved}, OptimWrapperDict(main=wrapper()))


def scaler_state() -> dict:
    return torch.amp.GradScaler('cpu').state_dict()


def test_the_guard_leaves_a_load_from_start_alone():
    """``load_from`` without resume uses the weights only: a fine-tuning start from a longer run's checkpoint."""
    from types import SimpleNamespace

    from beit_mm.engine.hooks import CheckpointGuardHook
    checkpoint = dict(meta=dict(iter=10**6, seed=2**40))
    CheckpointGuardHook().after_load_checkpoint(SimpleNamespace(_resume=False), checkpoint)
    assert checkpoint == dict(meta=dict(iter=10**6, seed=2**40))


def test_resume_reads_the_checkpoint_once(tmp_path, monkeypatch, trained, ade_demo_root):
    """``--resume CKPT`` opens the file once: the checks before the run (training state, seed, weights vs model) and
    MMEngine's load in ``Runner.resume`` share one read, passed to the runner by argument
    (:mod:`beit_mm.engine.resume.opened`). Before: three full reads of the file (GBs for BEiT-L). Counted at the
    file room's door (every opening of a checkpoint) and at ``torch.load``."""
    import beit_mm.fileio.checkpoint as room
    work_dir = str(tmp_path / 'work')
    os.makedirs(work_dir)
    checkpoint = shutil.copy(trained, osp.join(work_dir, 'iter_2.pth'))
    opens, reads, open_input, load = [], [], room.open_input, torch.load

    def is_checkpoint(path) -> bool:
        return osp.realpath(str(getattr(path, 'name', path))) == osp.realpath(checkpoint)

    def counting_open(path, *args, **kwargs):
        if is_checkpoint(path):
            opens.append(path)
        return open_input(path, *args, **kwargs)

    def counting_load(path, *args, **kwargs):
        if not kwargs.get('mmap') and is_checkpoint(path):
            reads.append(path)
        return load(path, *args, **kwargs)

    monkeypatch.setattr(room, 'open_input', counting_open)
    monkeypatch.setattr(torch, 'load', counting_load)
    _train(monkeypatch, work_dir, '--resume', checkpoint,
           *_options(ade_demo_root, 'train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None',
                     'val_evaluator=None', 'experiment_name=resume_once'))
    assert len(opens) == 1 and len(reads) == 1, (opens, reads)
    assert osp.isfile(osp.join(work_dir, 'iter_3.pth'))


def test_the_opened_checkpoint_goes_to_its_runner_only(tmp_path, trained, ade_demo_root):
    """The checkpoint the checks opened travels by argument to the one runner they checked it for: its load takes
    that object (once, the file unchanged), while any other opening of the same file, before or after, reads the file
    (no module-global slot hands it to whoever asks next, as ``beit_mm.fileio.checkpoint.hand_over`` did)."""
    checkpoint = shutil.copy(trained, str(tmp_path / 'iter_2.pth'))
    cfg = Config.fromfile(CONFIG)
    cfg.merge_from_dict(PARSE([CONFIG, *_options(ade_demo_root, 'val_cfg=None', 'val_dataloader=None',
                                                 'val_evaluator=None', 'experiment_name=opened_once')]).cfg_options)
    cfg.work_dir = str(tmp_path / 'work')
    opened = set_resume(cfg, checkpoint)
    read = opened.checkpoint
    runner = Runner.from_cfg(cfg)
    check_start_checkpoint(runner, cfg, opened)
    assert open_checkpoint(checkpoint) is not read  # another reader reads the file
    assert runner.load_checkpoint(checkpoint) is read  # this runner's load takes what the checks read ...
    assert runner.load_checkpoint(checkpoint) is not read  # ... once
    opened = set_resume(cfg, checkpoint)
    read = opened.checkpoint
    check_start_checkpoint(runner, cfg, opened)
    os.utime(checkpoint, ns=(0, 0))  # the file changed since it was read: read again
    assert runner.load_checkpoint(checkpoint) is not read
