"""A resumed checkpoint is validated as a whole against the run (``beit_mm.engine.resume``), in-process.

A tiny MMEngine ``Runner`` (a linear model, fused AdamW, LinearLR + CosineAnnealingLR, MMEngine's ``EMAHook``, a
validation metric with ``save_best``, ``beit_mm``'s guard, RNG and atomic checkpoint hooks) trains 4 iterations and
saves; each test resumes it with one field changed the way a stranger's file could. The checkpoint reaches the runner
as MMEngine's ``_load_checkpoint`` returned it (patched to hand the edited dict over), so what is tested is the
engine's validation, independent of the file room's own checks of the file.

At 58420c0 (before this module): the stride-0 ``exp_avg`` crashed the interpreter in the fused AdamW step (SIGSEGV);
the EMA of another shape resumed (MMEngine's swap put it into the model; only a load warning); the scheduler's
``param_name`` scheduled the weight decay; the 10**7 world size converted to a 10**7-batch replay; MMEngine removed the
folder ``best_ckpt`` named inside the work dir; the hostile best scores were taken as they were.

The first test reads MMEngine's source (and beit_mm's hooks') for every field they read from a checkpoint and fails
when one is not on the allow-list of ``beit_mm.engine.resume``.
"""
from __future__ import annotations

import ast
import copy
import inspect
import os.path as osp
import textwrap

import mmengine.hooks
import mmengine.runner.runner
import pytest
import torch
from mmengine.evaluator import BaseMetric, Evaluator
from mmengine.logging import MessageHub
from mmengine.model import BaseModel
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.optim.scheduler.param_scheduler import _ParamScheduler
from mmengine._strategy import SingleDeviceStrategy
from mmengine.runner import FlexibleRunner, LogProcessor, Runner
from mmengine.runner.checkpoint import _load_checkpoint_to_model
from torch import nn

import beit_mm.engine.hooks
from beit_mm.engine import resume

MAX_ITERS = 4


# --- the tiny run ---------------------------------------------------------------------------------------------------
class TinyModel(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, inputs, mode='tensor'):
        out = self.linear(torch.stack(inputs))
        if mode == 'loss':
            return dict(loss=out.pow(2).mean())
        return [dict(score=float(o.sum())) for o in out] if mode == 'predict' else out


class TinyMetric(BaseMetric):
    """A score that rises with every validation: each one is a new best."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def process(self, data_batch, data_samples) -> None:
        self.results.append(1)

    def compute_metrics(self, results) -> dict:
        self.calls += 1
        return dict(score=float(self.calls))


def _loader(batch_size: int = 2) -> dict:
    data = [dict(inputs=torch.full((4,), float(i))) for i in range(8)]
    return dict(dataset=data, sampler=dict(type='DefaultSampler', shuffle=True), batch_size=batch_size,
                num_workers=0, collate_fn=dict(type='pseudo_collate'))


def _runner(work_dir: str, resume_from: str | None = None, schedule_in_samples: bool = False) -> Runner:
    return Runner(
        model=TinyModel(), work_dir=work_dir, train_dataloader=_loader(), val_dataloader=_loader(),
        val_evaluator=Evaluator(TinyMetric()), val_cfg=dict(),
        train_cfg=dict(by_epoch=False, max_iters=MAX_ITERS, val_interval=2),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=0.01, weight_decay=0.05, fused=True)),
        param_scheduler=[dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=2),
                         dict(type='CosineAnnealingLR', by_epoch=False, begin=2, end=MAX_ITERS, T_max=2)],
        default_hooks=dict(checkpoint=dict(type='beit_mm.AtomicCheckpointHook', interval=2, by_epoch=False,
                                           save_best='score', rule='greater', max_keep_ckpts=2),
                           logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=[dict(type='EMAHook', momentum=0.5, priority='ABOVE_NORMAL'),
                      dict(type='beit_mm.CheckpointGuardHook', schedule_in_samples=schedule_in_samples),
                      dict(type='beit_mm.RNGStateHook')],
        log_processor=dict(by_epoch=False), randomness=dict(seed=0), resume=resume_from is not None,
        load_from=resume_from, default_scope='mmengine', experiment_name='resume')


@pytest.fixture(scope='module')
def trained(tmp_path_factory) -> tuple[str, dict]:
    """(work dir, ``iter_2.pth`` as MMEngine's loader returns it) of a 4-iteration run."""
    work_dir = str(tmp_path_factory.mktemp('trained'))
    _runner(work_dir).train()
    checkpoint = torch.load(osp.join(work_dir, 'iter_2.pth'), map_location='cpu', weights_only=True)
    return work_dir, checkpoint


def _resume(monkeypatch, work_dir: str, checkpoint: dict, schedule_in_samples: bool = False) -> Runner:
    """Resume a runner in ``work_dir`` from ``checkpoint`` (MMEngine's load handed the dict) and train to the end."""
    path = osp.join(work_dir, 'iter_2.pth')
    monkeypatch.setattr(mmengine.runner.runner, '_load_checkpoint', lambda *args, **kwargs: checkpoint)
    runner = _runner(work_dir, path, schedule_in_samples)
    runner.train()
    return runner


def _log(work_dir) -> str:
    """What the runners of ``work_dir`` logged (``<timestamp>/<timestamp>.log``)."""
    import glob
    return ''.join(open(path).read() for path in glob.glob(osp.join(str(work_dir), '*', '*.log')))


def _refused(monkeypatch, tmp_path, checkpoint: dict, match: str, **kwargs) -> str:
    with pytest.raises(resume.TrainingStateError, match=match) as error:
        _resume(monkeypatch, str(tmp_path), checkpoint, **kwargs)
    assert 'iter_2.pth' in str(error.value) and 'Fix: ' in str(error.value)
    return str(error.value)


# --- what MMEngine reads, from its source ---------------------------------------------------------------------------
def _readers(function, roots: dict[str, tuple]) -> set[tuple]:
    """The fields ``function`` reads from the mappings named in ``roots`` (parameter name -> path), from its source:
    ``x['k']``, ``x.get('k')``, ``x.pop('k')``, ``'k' in x``, names assigned from those, loops over constant tuples,
    constants of the module; ``message_hub.get_info(K)`` and ``K in ....runtime_info`` as
    ``('message_hub', 'runtime_info', K)``, an f-string's fields as ``*``; ``__dict__.update(x)`` as ``x``'s ``*``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    module_constants = function.__globals__
    aliases, loop_values, assigned = dict(roots), {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Tuple):
            loop_values[node.target.id] = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)

    def keys(node) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            return [''.join(v.value if isinstance(v, ast.Constant) else '*' for v in node.values)]
        if isinstance(node, ast.Name):
            if node.id in loop_values:
                return loop_values[node.id]
            if isinstance(module_constants.get(node.id), str):
                return [module_constants[node.id]]
            return [k for value in assigned.get(node.id, []) for k in keys(value)]
        return []

    def path(node):
        if isinstance(node, ast.Name):
            if node.id in aliases:
                return aliases[node.id]
            for value in assigned.get(node.id, []):
                found = path(value)
                if found is not None:
                    return found
            return None
        if isinstance(node, ast.BoolOp):
            return path(node.values[0])
        if isinstance(node, ast.Subscript):
            base, found = path(node.value), keys(node.slice)
            return base + (found[0],) if base is not None and len(found) == 1 else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ('get', 'pop') \
                and node.args:
            base, found = path(node.func.value), keys(node.args[0])
            return base + (found[0],) if base is not None and len(found) == 1 else None
        return None

    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            base = path(node.value)
            read |= {base + (k,) for k in keys(node.slice)} if base is not None else set()
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, target = node.func.attr, node.func.value
            if attr in ('get', 'pop') and node.args and path(target) is not None:
                read |= {path(target) + (k,) for k in keys(node.args[0])}
            elif attr == 'get_info' and node.args:
                read |= {('message_hub', 'runtime_info', k) for k in keys(node.args[0])}
            elif attr == 'update' and isinstance(target, ast.Attribute) and target.attr == '__dict__' and node.args:
                base = path(node.args[0])
                read |= {base + ('*',)} if base is not None else set()
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            container = node.comparators[0]
            if isinstance(container, ast.Attribute) and container.attr == 'runtime_info':
                read |= {('message_hub', 'runtime_info', k) for k in keys(node.left)}
            elif path(container) is not None:
                read |= {path(container) + (k,) for k in keys(node.left)}
    return read


def _hook_methods(module) -> list:
    """Every method of every hook class of ``module`` that reads a checkpoint or the message hub."""
    methods = []
    for cls in vars(module).values():
        if isinstance(cls, type) and issubclass(cls, mmengine.hooks.Hook):
            methods += [m for name, m in vars(cls).items() if inspect.isfunction(m)
                        and ('checkpoint' in inspect.signature(m).parameters or 'runtime_info' in inspect.getsource(m)
                             or 'get_info' in inspect.getsource(m))]
    return methods


def _covered(field: tuple) -> bool:
    """Whether ``beit_mm.engine.resume``'s allow-list validates (or, on purpose, drops) ``field``."""
    head, rest = field[0], field[1:]
    if not rest:
        return head in resume.CHECKPOINT_FIELDS
    if head == 'meta':
        return rest[0] in resume.META_FIELDS + resume.META_DROPPED
    if head == 'optimizer':
        return rest[0] in resume.OPTIMIZER_FIELDS
    if head == 'param_schedulers':  # _ParamScheduler.load_state_dict: __dict__.update, i.e. every key
        return rest == ('*',)  # validated as this run's schedulers' own keys (check_param_schedulers)
    if head == 'message_hub' and len(rest) == 1:
        return rest[0] in resume.MESSAGE_HUB_FIELDS
    if head == 'message_hub' and rest[0] == 'runtime_info' and len(rest) == 2:
        key = rest[1].split('*')[0] if '*' in rest[1] else rest[1]
        if '*' in rest[1]:
            return key.startswith(resume.RUNTIME_INFO_PREFIXES + resume.RUNTIME_INFO_REWRITTEN_PREFIXES)
        return key in resume.RUNTIME_INFO_FIELDS + resume.RUNTIME_INFO_REWRITTEN or key.startswith(
            resume.RUNTIME_INFO_PREFIXES + resume.RUNTIME_INFO_REWRITTEN_PREFIXES)
    return False


def test_every_field_mmengine_and_beit_mm_read_from_a_checkpoint_is_on_the_allow_list():
    readers = {
        Runner.resume: dict(checkpoint=()),
        Runner.load_checkpoint: dict(checkpoint=()),
        _load_checkpoint_to_model: dict(checkpoint=()),
        MessageHub.load_state_dict: dict(state_dict=('message_hub',)),
        OptimWrapper.load_state_dict: dict(state_dict=('optimizer',)),
        AmpOptimWrapper.load_state_dict: dict(state_dict=('optimizer',)),
        torch.optim.Optimizer.load_state_dict: dict(state_dict=('optimizer',)),
        _ParamScheduler.load_state_dict: dict(state_dict=('param_schedulers',)),
        FlexibleRunner.resume: dict(checkpoint=()),
        SingleDeviceStrategy.resume: dict(checkpoint=()),
    }
    for module in (mmengine.hooks, beit_mm.engine.hooks):
        readers.update({method: dict(checkpoint=()) for method in _hook_methods(module)})
    readers.update({m: {} for m in vars(LogProcessor).values() if inspect.isfunction(m)
                    and 'runtime_info' in inspect.getsource(m)})
    found = {function.__qualname__: _readers(function, roots) for function, roots in readers.items()}
    every = set().union(*found.values())
    # the parser sees what it must (a parser that finds nothing would pass anything)
    assert {('meta', 'iter'), ('meta', 'epoch'), ('meta', 'seed'), ('meta', 'config'), ('message_hub',),
            ('optimizer',), ('param_schedulers',), ('state_dict',), ('ema_state_dict',), ('rng_states',),
            ('message_hub', 'log_scalars'), ('message_hub', 'runtime_info', 'best_ckpt'),
            ('message_hub', 'runtime_info', 'best_ckpt_*'), ('message_hub', 'runtime_info', 'best_score'),
            ('message_hub', 'runtime_info', 'best_score_*'), ('message_hub', 'runtime_info', 'keep_ckpt_ids'),
            ('message_hub', 'runtime_info', 'loop_stage'), ('optimizer', 'loss_scaler'),
            ('optimizer', 'param_groups'), ('param_schedulers', '*'), ('meta', 'dense_probe')} <= every, every
    uncovered = {name: sorted(f for f in fields if not _covered(f)) for name, fields in found.items()}
    assert not any(uncovered.values()), {k: v for k, v in uncovered.items() if v}


# --- a checkpoint of this run resumes; what nothing reads is dropped ------------------------------------------------
def test_an_own_checkpoint_resumes_and_fields_nobody_reads_are_dropped(monkeypatch, tmp_path, trained):
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    checkpoint['payload'] = 'x' * 100
    checkpoint['meta'].update(config='import os', unknown=1)
    checkpoint['message_hub']['runtime_info']['train/stale'] = 1.0
    checkpoint['param_schedulers'][0]['_get_value'] = 'not a method'
    runner = _resume(monkeypatch, str(tmp_path), checkpoint)
    assert runner.iter == MAX_ITERS and osp.isfile(tmp_path / f'iter_{MAX_ITERS}.pth')
    assert [s.param_name for s in runner.param_schedulers] == ['lr', 'lr']
    assert not hasattr(runner.param_schedulers[0], '_get_value') or callable(runner.param_schedulers[0]._get_value)
    dropped = [line for line in _log(tmp_path).splitlines() if 'dropped' in line]
    assert dropped and all(k in dropped[0] for k in ('payload', 'meta.unknown', "param_schedulers[0]._get_value"))
    assert not {'config', 'cfg', 'unknown'} & set(checkpoint['meta'])  # what MMEngine was handed


# --- hostile fields ---------------------------------------------------------------------------------------------
def test_a_stride_0_optimizer_state_is_refused(monkeypatch, tmp_path, trained):
    """At 58420c0 the fused AdamW stepped over a 1-element storage with the weight's 12 elements: SIGSEGV."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    weight = next(i for i, s in checkpoint['optimizer']['state'].items() if s['exp_avg'].ndim == 2)
    checkpoint['optimizer']['state'][weight]['exp_avg'] = torch.zeros(1).expand(3, 4)
    message = _refused(monkeypatch, tmp_path, checkpoint, r"optimizer\.state\[\d+\]\['exp_avg'\] = float32 tensor of "
                       r'shape \(3, 4\): strides \(0, 0\) at offset 0 over 4 storage bytes')
    assert "parameter's strides are (4, 1)" in message


@pytest.mark.parametrize('edit, match', [
    (lambda ema: ema.update({'module.linear.weight': torch.zeros(5, 4)}),
     r"ema_state_dict\['module\.linear\.weight'\] = float32 tensor of shape \(5, 4\): this run's model has a float32 "
     r'tensor of shape \(3, 4\)'),
    (lambda ema: ema.pop('module.linear.bias'), r"1 of this run's keys missing \['module\.linear\.bias'\]"),
    (lambda ema: ema.update({'module.extra': torch.zeros(1)}), r"1 unexpected \['module\.extra'\]"),
    (lambda ema: ema.update(steps=torch.tensor(10**9)), r"ema_state_dict\['steps'\]"),
], ids=['shape', 'missing', 'unexpected', 'steps'])
def test_an_ema_that_does_not_fit_the_model_is_refused_before_mmengine_swaps_it_in(monkeypatch, tmp_path, trained,
                                                                                    edit, match):
    """At 58420c0 MMEngine's EMAHook swapped the EMA of another shape into state_dict after the guard had checked it:
    the run resumed with only MMEngine's warning (a missing key: KeyError in the swap)."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    edit(checkpoint['ema_state_dict'])
    _refused(monkeypatch, tmp_path, checkpoint, match)


@pytest.mark.parametrize('key, value', [('param_name', 'weight_decay'), ('by_epoch', True), ('start_factor', 10.0),
                                        ('last_step', 10**9), ('base_values', [float('nan')])])
def test_a_scheduler_of_another_schedule_is_refused(monkeypatch, tmp_path, trained, key, value):
    """At 58420c0 ``param_name='weight_decay'`` made the resumed LinearLR schedule the weight decay, not the lr."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    checkpoint['param_schedulers'][0][key] = value
    _refused(monkeypatch, tmp_path, checkpoint, rf'param_schedulers\[0\]\.{key} = ')


@pytest.mark.parametrize('world_size, batch_size, named', [
    (10**7, 2, r'meta\.world_size = 10000000: the batch record holds ints'),
    (2**16, 2**8, r'meta\.world_size x meta\.batch_size = 16777216: 8\.38861e\+06x the images per iteration'),
])
def test_a_samples_resume_is_bounded_after_the_conversion(monkeypatch, tmp_path, trained, world_size, batch_size,
                                                          named):
    """At 58420c0 ``--resume-schedule-in-samples`` converted ``meta.iter`` 2 by the checkpoint's world size after the
    iteration bound was checked: a 10**7-batch replay before the first step (and a loop 10**7 times longer)."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    checkpoint['meta'].update(world_size=world_size, batch_size=batch_size)
    _refused(monkeypatch, tmp_path, checkpoint, named, schedule_in_samples=True)


def test_a_samples_resume_within_bounds_converts_then_checks(monkeypatch, tmp_path, trained):
    """2 processes x 2 images then, 1 x 2 now: iteration 2 -> 4 of max_iters 4 -> 8, the schedulers' spans converted
    and then checked against this run's converted schedule; the run ends at 8."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    checkpoint['meta'].update(world_size=2, samples_seen=8)
    runner = _resume(monkeypatch, str(tmp_path), checkpoint, schedule_in_samples=True)
    assert runner.iter == 2 * MAX_ITERS
    assert (runner.param_schedulers[1].begin, runner.param_schedulers[1].end) == (4, 2 * MAX_ITERS)


def test_a_best_ckpt_naming_a_folder_inside_the_work_dir_removes_nothing(monkeypatch, tmp_path, trained):
    """At 58420c0 the work dir's own checkpoint could name any ``best_*`` path directly in the work dir: a folder
    there was removed (``rmtree``) at the first better score."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    folder = tmp_path / 'best_data.pth'
    folder.mkdir()
    (folder / 'labels.json').write_text('a user file')
    checkpoint['message_hub']['runtime_info']['best_ckpt'] = str(folder)
    checkpoint['message_hub']['runtime_info'].pop('best_score')  # the first validation is a better score
    runner = _resume(monkeypatch, str(tmp_path), checkpoint)
    assert (folder / 'labels.json').read_text() == 'a user file'
    assert runner.iter == MAX_ITERS and osp.isfile(tmp_path / f'best_score_iter_{MAX_ITERS}.pth')
    assert 'message_hub.runtime_info.best_ckpt (names no checkpoint file' in _log(tmp_path)


@pytest.mark.parametrize('score', [float('nan'), float('inf'), '0.5', 1e300, 10**400, True, [1.0]],
                         ids=['nan', 'inf', 'str', '1e300', '10**400', 'bool', 'list'])
def test_hostile_best_scores_are_refused(monkeypatch, tmp_path, trained, score):
    """At 58420c0 inf/huge/str scores were kept (no later validation ever saved a best checkpoint, or the comparison
    raised a TypeError mid-run)."""
    _, checkpoint = trained
    checkpoint = copy.deepcopy(checkpoint)
    checkpoint['message_hub']['runtime_info']['best_score'] = score
    _refused(monkeypatch, tmp_path, checkpoint, r'message_hub\.runtime_info\.best_score = .*a finite number of '
             r'magnitude <= 1e\+15')


def test_the_state_dict_and_log_history_are_checked_too(monkeypatch, tmp_path, trained):
    _, checkpoint = trained
    hostile = copy.deepcopy(checkpoint)
    hostile['state_dict']['linear.weight'] = torch.full((3, 4), float('nan'))
    _refused(monkeypatch, tmp_path, hostile, r"state_dict\['linear\.weight'\] = .*holds NaN or inf")
    hostile = copy.deepcopy(checkpoint)
    buffer = next(iter(hostile['message_hub']['log_scalars'].values()))
    buffer._log_history = buffer._log_history[:0].astype(object)
    runner = _resume(monkeypatch, str(tmp_path / 'logs'), hostile)
    assert runner.iter == MAX_ITERS


def test_a_resume_in_its_own_work_dir_keeps_what_the_run_reads(monkeypatch, trained):
    """The run's own ``iter_2.pth`` resumed where it lies: nothing the run reads is dropped (only the best checkpoint
    it names, which a better score of iteration 4 has replaced since)."""
    work_dir, checkpoint = trained
    runner = _resume(monkeypatch, work_dir, copy.deepcopy(checkpoint))
    assert runner.iter == MAX_ITERS
    assert runner.message_hub.get_info('keep_ckpt_ids') == [2, 4]
    dropped = [line for line in _log(work_dir).splitlines() if 'dropped' in line]
    assert len(dropped) == 1 and 'dropped message_hub.runtime_info.best_ckpt (names no checkpoint file' in dropped[0]
    assert dropped[0].count('(') == 2, dropped  # that one entry, and the closing sentence's work dir


def test_a_checkpoint_placed_in_the_work_dir_deletes_none_of_the_runs_own(tmp_path):
    """A foreign checkpoint in the work dir whose deletion list names the run's own ``iter_2.pth`` (one more entry
    than ``max_keep_ckpts``): at 75b4771 the resumed run deleted it (the list was checked for form, the file for
    where it lies); now a checkpoint the work dir's manifest does not list with its content steers no deletion."""
    from beit_mm.fileio.manifest import file_sha256
    work_dir = str(tmp_path / 'work')
    _runner(work_dir).train()
    own = {name: file_sha256(osp.join(work_dir, name)) for name in ('iter_2.pth', 'iter_4.pth')}
    placed = torch.load(osp.join(work_dir, 'iter_4.pth'), map_location='cpu', weights_only=True)
    placed['message_hub']['runtime_info']['keep_ckpt_ids'] = [2, 3, 4]
    path = osp.join(work_dir, 'iter_3.pth')
    torch.save(placed, path)
    _runner(work_dir, path).train()
    assert {name: file_sha256(osp.join(work_dir, name)) for name in own} == own
    assert 'dropped message_hub.runtime_info.keep_ckpt_ids (not this work dir\'s own checkpoints)' in _log(work_dir)
