"""What a resumed training checkpoint may steer: its training state is checked before MMEngine acts on it.

MMEngine 0.10.7's ``Runner.resume`` trusts what a checkpoint carries, and a checkpoint is a file from whoever made
it. Left unchecked:

- ``message_hub.runtime_info.best_ckpt`` (``best_ckpt_<metric>``) names the file ``CheckpointHook`` removes when a
  better score arrives, with ``rmtree`` when it is a folder: any folder the user can write;
- ``keep_ckpt_ids`` longer than ``max_keep_ckpts`` makes ``CheckpointHook.before_train`` delete ``iter_<id>.pth``
  (``epoch_<id>.pth``) in the work dir resumed into, which may hold another run's files;
- ``meta.iter`` is replayed: an ``IterBasedTrainLoop`` loads that many batches before training (``10**9``: a silent
  hang); ``meta.seed`` goes to ``np.random.seed`` (``ValueError`` beyond ``2**32 - 1``); the generator states of
  ``beit_mm.RNGStateHook`` go to torch, numpy and ``random`` (a numpy ``pos`` past 624 reads out of bounds);
- optimizer moments of another shape than their parameters are read and written out of bounds by fused kernels
  (``AdamW(fused=True)``: SIGSEGV), and torch takes the kernel flags (``fused``, ``capturable``, ...) from the file.

What the checkpoint may steer is the training state of this run, bounded: the iteration and epoch within the
schedule, a seed numpy accepts, generator states the generators accept, optimizer state of the parameters' shapes
and dtypes. Values that name files are kept only when the checkpoint is this work dir's own and they name its own
checkpoint files; otherwise they are dropped (and the drop is returned, for one warning). Everything else is a
:class:`TrainingStateError` naming the file, the key, the value and the fix. ``beit_mm.CheckpointGuardHook`` runs
these checks in ``after_load_checkpoint``, before ``Runner.resume`` uses any of it (docs/faults.md, "What a resumed
checkpoint can steer").
"""
from __future__ import annotations

import math
import numbers
import os.path as osp
from collections.abc import Mapping

import torch
from mmengine.optim import OptimWrapperDict
from torch import Tensor

from .paths import inside

#: ``np.random.seed`` takes seeds in [0, 2**32 - 1]; MMEngine seeds numpy with the run seed.
MAX_SEED = 2**32 - 1
#: The Mersenne Twister keeps 624 32-bit words (numpy's ``MT19937`` and python's ``random``); the position is 0..624.
MT_WORDS = 624
#: ``random.getstate()`` version of CPython 3.
PYTHON_RANDOM_VERSION = 3
#: What ``beit_mm.engine.hooks.rng_state.capture_rng_state`` saves for each process.
RNG_STATE_KEYS = ('torch', 'cuda', 'numpy', 'python')
#: ``message_hub.runtime_info`` keys that name files ``CheckpointHook`` removes (``best_ckpt_<metric>`` too).
PATH_KEYS = ('best_ckpt', 'last_ckpt')
#: Param-group flags that say how the optimizer step runs, not what it computes: always this run's.
KERNEL_FLAGS = ('fused', 'foreach', 'capturable', 'differentiable')


class TrainingStateError(ValueError):
    """A training checkpoint carries state that resuming cannot act on safely; the message names the file, the key,
    the value and the fix."""


def _show(value) -> str:
    if isinstance(value, Tensor):
        return f'{str(value.dtype).replace("torch.", "")} tensor of shape {tuple(value.shape)}'
    text = repr(value)
    return text if len(text) <= 80 else f'{text[:77]}...'


def _refuse(source: str, key: str, value, why: str, fix: str) -> TrainingStateError:
    return TrainingStateError(f'{source}: {key} = {_show(value)}: {why}. Fix: {fix}')


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    """A finite real number (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _bounded_int(value, low: int, high: int) -> bool:
    return _is_int(value) and low <= value <= high


# --- counters, seed, generator states -------------------------------------------------------------------------------
def check_counters(meta: Mapping, source: str, max_iters: int, max_epochs: int) -> None:
    """``meta.iter`` in [0, max_iters] and ``meta.epoch`` in [0, max_epochs], ints (the schedule of this run).

    Raises:
        TrainingStateError: a counter of another type or past the schedule.
    """
    for key, high, setting in (('iter', max_iters, 'train_cfg.max_iters'),
                               ('epoch', max_epochs, 'train_cfg.max_epochs')):
        value = meta.get(key)
        if not _bounded_int(value, 0, high):
            replay = '; an iteration-based loop first replays that many batches' if key == 'iter' else ''
            raise _refuse(source, f'meta.{key}', value,
                          f'a resumed run continues at this {key}, which must be an int in [0, {high}] (this '
                          f'schedule\'s {setting.split(".")[1]} {high}){replay}',
                          f'resume from a checkpoint this schedule covers, or raise {setting} to cover it (for an '
                          'epoch-based loop max_iters is max_epochs x batches per epoch)')


def check_seed(seed, source: str) -> None:
    """``meta.seed``: None or an int in [0, 2**32 - 1] (what ``np.random.seed`` accepts)."""
    if seed is not None and not _bounded_int(seed, 0, MAX_SEED):
        raise _refuse(source, 'meta.seed', seed, 'the run seed must be an int in [0, 2**32 - 1] (numpy\'s range)',
                      'resume from a checkpoint tools/train.py wrote, or start a new run from its weights with '
                      f'--cfg-options load_from={source} and your own randomness.seed')


_RNG_FIX = ('resume from a checkpoint tools/train.py wrote (beit_mm.RNGStateHook), or start a new run from its weights '
            'only: --cfg-options load_from=CHECKPOINT (no --resume)')


def _check_words(source: str, key: str, words, length: int) -> None:
    """An int64 tensor of ``length`` Mersenne Twister words, each in [0, 2**32 - 1]."""
    if not (isinstance(words, Tensor) and words.dtype == torch.int64 and tuple(words.shape) == (length,)):
        raise _refuse(source, key, words, f'expected an int64 tensor of shape ({length},)', _RNG_FIX)
    if length and not (int(words.min()) >= 0 and int(words.max()) <= MAX_SEED):
        raise _refuse(source, key, words, 'holds words outside [0, 2**32 - 1]', _RNG_FIX)


def _check_generator(source: str, key: str, state, device: str) -> None:
    """A generator state torch's own generator of ``device`` accepts (tried on a scratch generator)."""
    own = torch.get_rng_state() if device == 'cpu' else torch.cuda.get_rng_state()
    if not (isinstance(state, Tensor) and state.dtype == torch.uint8 and tuple(state.shape) == tuple(own.shape)):
        raise _refuse(source, key, state, f'expected a uint8 tensor of shape {tuple(own.shape)} (torch\'s {device} '
                      'generator state)', _RNG_FIX)
    try:
        torch.Generator(device=device).set_state(state)
    except RuntimeError as error:
        raise _refuse(source, key, state, f'torch refuses it ({str(error).splitlines()[0][:120]})', _RNG_FIX) from None


def check_rng_state(state, source: str, key: str) -> None:
    """One process's generator states as ``beit_mm.RNGStateHook`` saves them (``capture_rng_state``): ``torch`` the
    CPU generator's uint8 state, ``cuda`` None or a uint8 state, ``numpy`` ``keys`` int64 (624,) words, ``pos`` 0..624,
    ``has_gauss`` 0/1, ``cached_gaussian`` a finite float; ``python`` ``version`` 3, ``state`` int64 (625,): 624 words
    and a position 0..624, ``gauss_next`` None or a finite float.

    Raises:
        TrainingStateError: naming the first entry that differs.
    """
    if not isinstance(state, Mapping) or any(k not in state for k in RNG_STATE_KEYS):
        raise _refuse(source, key, state, f'expected a dict with {", ".join(RNG_STATE_KEYS)}', _RNG_FIX)
    _check_generator(source, f"{key}['torch']", state['torch'], 'cpu')
    cuda = state['cuda']
    if cuda is not None:
        if torch.cuda.is_available():
            _check_generator(source, f"{key}['cuda']", cuda, 'cuda')
        elif not (isinstance(cuda, Tensor) and cuda.dtype == torch.uint8 and cuda.ndim == 1):
            raise _refuse(source, f"{key}['cuda']", cuda, 'expected None or a uint8 tensor', _RNG_FIX)
    np_state, py_state = state['numpy'], state['python']
    if not isinstance(np_state, Mapping) or not isinstance(py_state, Mapping):
        raise _refuse(source, key, state, 'numpy and python must be dicts', _RNG_FIX)
    _check_words(source, f"{key}['numpy']['keys']", np_state.get('keys'), MT_WORDS)
    for name, ok, expected in (('pos', _bounded_int(np_state.get('pos'), 0, MT_WORDS), f'an int in [0, {MT_WORDS}]'),
                               ('has_gauss', _bounded_int(np_state.get('has_gauss'), 0, 1), '0 or 1'),
                               ('cached_gaussian', _is_real(np_state.get('cached_gaussian')), 'a finite float')):
        if not ok:
            raise _refuse(source, f"{key}['numpy']['{name}']", np_state.get(name), f'expected {expected}', _RNG_FIX)
    if py_state.get('version') != PYTHON_RANDOM_VERSION or isinstance(py_state.get('version'), bool):
        raise _refuse(source, f"{key}['python']['version']", py_state.get('version'),
                      f'expected {PYTHON_RANDOM_VERSION} (CPython\'s random)', _RNG_FIX)
    words = py_state.get('state')
    _check_words(source, f"{key}['python']['state']", words, MT_WORDS + 1)
    if int(words[-1]) > MT_WORDS:
        raise _refuse(source, f"{key}['python']['state']", words, f'its last entry (the position) must be in '
                      f'[0, {MT_WORDS}]', _RNG_FIX)
    gauss_next = py_state.get('gauss_next')
    if gauss_next is not None and not _is_real(gauss_next):
        raise _refuse(source, f"{key}['python']['gauss_next']", gauss_next, 'expected None or a finite float',
                      _RNG_FIX)


def check_rng_states(states, source: str) -> None:
    """``checkpoint['rng_states']``: None (not saved), or a list indexed by rank of None (unknown) or
    :func:`check_rng_state` entries."""
    if states is None:
        return
    if not isinstance(states, (list, tuple)):
        raise _refuse(source, 'rng_states', states, 'expected a list indexed by rank', _RNG_FIX)
    for rank, state in enumerate(states):
        if state is not None:
            check_rng_state(state, source, f'rng_states[{rank}]')


# --- runtime values that name files ---------------------------------------------------------------------------------
def _own_checkpoint_file(path, work_dir: str, prefix: str) -> bool:
    """Whether ``path`` (links resolved) is a file name directly inside ``work_dir`` starting with ``prefix``."""
    if not isinstance(path, str) or not path or '://' in path:
        return False
    real = osp.realpath(path)
    return osp.dirname(real) == osp.realpath(work_dir) and osp.basename(real).startswith(prefix)


def drop_foreign_runtime_values(runtime_info: dict, work_dir: str, same_run: bool, last_step: int) -> list[str]:
    """Remove, in place, the ``runtime_info`` values that would make ``CheckpointHook`` remove files other than this
    run's own checkpoints; returns the keys removed.

    Kept only when ``same_run`` (the checkpoint lies in ``work_dir``): ``best_ckpt``/``best_ckpt_<metric>`` naming a
    ``best_*`` file directly in ``work_dir``, ``last_ckpt`` naming a file directly in ``work_dir``, ``keep_ckpt_ids``
    a list of distinct ints in [0, ``last_step``] (the checkpoint's own iteration or epoch). A checkpoint from
    elsewhere steers no file: its best checkpoint is not removed when a better one is saved, and the rotation
    (``max_keep_ckpts``) starts with this run's saves. ``best_score``/``best_score_<metric>`` that are not numbers
    (or NaN) are dropped too (MMEngine compares them to every validation score). Each key is returned with why.
    """
    dropped = []
    for key in list(runtime_info):
        value = runtime_info[key]
        if key in PATH_KEYS or key.startswith('best_ckpt_'):
            keep = same_run and _own_checkpoint_file(value, work_dir, 'best_' if key.startswith('best') else '')
        elif key == 'keep_ckpt_ids':
            keep = (same_run and isinstance(value, list) and len(set(value)) == len(value)
                    and all(_bounded_int(step, 0, last_step) for step in value))
        elif key == 'best_score' or key.startswith('best_score_'):
            keep = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
        else:
            continue
        if not keep:
            del runtime_info[key]
            why = 'not a number' if key.startswith('best_score') else (
                'not this work dir\'s own checkpoints' if key == 'keep_ckpt_ids' else
                'names a file other than this work dir\'s own checkpoints')
            dropped.append(f'message_hub.runtime_info.{key} ({why})')
    return dropped


def validate_runtime_state(checkpoint: dict, source: str, work_dir: str, max_iters: int, max_epochs: int,
                           same_run: bool) -> list[str]:
    """Check and clean, in place, what a training checkpoint tells the runner and its hooks (the optimizer aside:
    :func:`check_optimizer_state`).

    Args:
        checkpoint: the opened checkpoint (``meta``, ``message_hub``, ``rng_states``, ...).
        source: the checkpoint's path, for messages.
        work_dir: this run's work dir (``runner.work_dir``).
        max_iters, max_epochs: this run's schedule (``runner.max_iters``, ``runner.max_epochs``).
        same_run: whether the checkpoint lies in ``work_dir`` (it is this work dir's own run).

    Returns:
        list[str]: the dotted keys dropped, each with why (:func:`drop_foreign_runtime_values`), for one warning.

    Raises:
        TrainingStateError: a counter, seed or generator state out of bounds, or a message hub of another layout.
    """
    meta = checkpoint.get('meta')
    if not isinstance(meta, dict):
        raise _refuse(source, 'meta', meta, 'a training checkpoint keeps its iteration and seed in a dict',
                      'resume from a checkpoint tools/train.py wrote')
    check_counters(meta, source, max_iters, max_epochs)
    check_seed(meta.get('seed'), source)
    check_rng_states(checkpoint.get('rng_states'), source)
    hub = checkpoint.get('message_hub')
    if not (isinstance(hub, dict) and all(isinstance(hub.get(k), dict)
                                          for k in ('log_scalars', 'runtime_info', 'resumed_keys'))):
        raise _refuse(source, 'message_hub', hub, 'expected MessageHub.state_dict(): a dict of the dicts '
                      'log_scalars, runtime_info and resumed_keys', 'resume from a checkpoint tools/train.py wrote')
    return drop_foreign_runtime_values(hub['runtime_info'], work_dir, same_run, max(meta['iter'], meta['epoch']))


# --- optimizer state ------------------------------------------------------------------------------------------------
_OPTIMIZER_FIX = ('resume with the model and optimizer settings this checkpoint was trained with, or start a new run '
                  'from its weights only: --cfg-options load_from=CHECKPOINT (no --resume)')


def _kind(value) -> str:
    """What a param-group hyperparameter is, for comparing the checkpoint's with this run's."""
    if isinstance(value, bool) or value is None:
        return 'flag'
    if isinstance(value, numbers.Real):
        return 'number'
    if isinstance(value, Tensor) and value.ndim == 0 and not value.is_complex():
        return 'scalar tensor'
    if isinstance(value, str):
        return 'str'
    if isinstance(value, (tuple, list)) and all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                                for v in value):
        return f'{len(value)} numbers'
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return 'names'
    return type(value).__name__


def _finite(value) -> bool:
    if isinstance(value, Tensor):
        return bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return all(_finite(v) for v in value)
    return not isinstance(value, numbers.Real) or isinstance(value, bool) or math.isfinite(value)


def _check_group(source: str, key: str, own: dict, saved) -> None:
    """One saved param group against this run's: the same number of parameters, hyperparameters of the same kind
    (finite numbers, equal flags); kernel flags (:data:`KERNEL_FLAGS`) are set to this run's."""
    if not isinstance(saved, dict) or not isinstance(saved.get('params'), list):
        raise _refuse(source, key, saved, 'expected a param group dict with a params list', _OPTIMIZER_FIX)
    if len(saved['params']) != len(own['params']):
        raise _refuse(source, f'{key}.params', saved['params'], f'{len(saved["params"])} parameters, this run\'s '
                      f'group has {len(own["params"])}', _OPTIMIZER_FIX)
    for name in KERNEL_FLAGS:
        if name in own:
            saved[name] = own[name]
    for name, value in saved.items():
        if name == 'params':
            continue
        kind = _kind(value)
        if name in own and kind != _kind(own[name]):
            raise _refuse(source, f'{key}.{name}', value, f'this run\'s optimizer has {_show(own[name])} there',
                          _OPTIMIZER_FIX)
        if kind == 'flag' and name in own and value != own[name]:
            raise _refuse(source, f'{key}.{name}', value, f'this run\'s optimizer has {name}={own[name]!r}; the '
                          'optimizer state does not fit the other setting', _OPTIMIZER_FIX)
        if kind not in ('flag', 'number', 'scalar tensor', 'str', 'names') and not kind.endswith(' numbers'):
            raise _refuse(source, f'{key}.{name}', value, 'a param group holds numbers, flags and names',
                          _OPTIMIZER_FIX)
        if not _finite(value):
            raise _refuse(source, f'{key}.{name}', value, 'not finite', _OPTIMIZER_FIX)


def _check_param_state(source: str, key: str, param: Tensor, state) -> None:
    """One parameter's state: tensors of the parameter's shape and kind of dtype (``ndim > 0``), finite real
    scalars (``step``), finite numbers or None."""
    if not isinstance(state, dict):
        raise _refuse(source, key, state, 'expected a dict of tensors', _OPTIMIZER_FIX)
    for name, value in state.items():
        if isinstance(value, Tensor) and value.ndim > 0:
            if tuple(value.shape) != tuple(param.shape):
                raise _refuse(source, f'{key}[{name!r}]', value, f'its parameter has shape {tuple(param.shape)} '
                              '(a fused optimizer would read and write out of bounds)', _OPTIMIZER_FIX)
            if (value.is_floating_point(), value.is_complex()) != (param.is_floating_point(), param.is_complex()):
                raise _refuse(source, f'{key}[{name!r}]', value, f'its parameter is {param.dtype}', _OPTIMIZER_FIX)
        elif isinstance(value, Tensor):
            if value.is_complex() or not bool(torch.isfinite(value)) or (name == 'step' and float(value) < 0):
                raise _refuse(source, f'{key}[{name!r}]', value, f'{float(value.real)}: expected a finite '
                              f'non-negative real scalar', _OPTIMIZER_FIX)
        elif value is not None and not (_is_real(value) or isinstance(value, bool)):
            raise _refuse(source, f'{key}[{name!r}]', value, 'per-parameter state holds tensors and numbers',
                          _OPTIMIZER_FIX)


def _check_torch_optimizer(optimizer: torch.optim.Optimizer, state_dict, source: str, key: str) -> None:
    if not isinstance(state_dict, dict) or not isinstance(state_dict.get('state'), dict) \
            or not isinstance(state_dict.get('param_groups'), list):
        raise _refuse(source, key, state_dict, 'expected Optimizer.state_dict(): state and param_groups',
                      _OPTIMIZER_FIX)
    groups, saved_groups = optimizer.param_groups, state_dict['param_groups']
    if len(saved_groups) != len(groups):
        raise _refuse(source, f'{key}.param_groups', saved_groups, f'{len(saved_groups)} param groups, this run\'s '
                      f'optimizer has {len(groups)} (another model, paramwise_cfg or layer decay)', _OPTIMIZER_FIX)
    params = {}
    for index, (own, saved) in enumerate(zip(groups, saved_groups)):
        _check_group(source, f'{key}.param_groups[{index}]', own, saved)
        for param_id, param in zip(saved['params'], own['params']):
            if not _is_int(param_id) or param_id in params:
                raise _refuse(source, f'{key}.param_groups[{index}].params', param_id,
                              'parameter ids are distinct ints', _OPTIMIZER_FIX)
            params[param_id] = param
    for param_id, state in state_dict['state'].items():
        if param_id not in params:
            raise _refuse(source, f'{key}.state', param_id, 'state for a parameter id no param group lists',
                          _OPTIMIZER_FIX)
        _check_param_state(source, f'{key}.state[{param_id}]', params[param_id], state)


def _check_numbers(source: str, key: str, value, required: tuple = (), positive: tuple = ()) -> None:
    """A dict of finite numbers, flags and tuples of numbers (``params`` aside), with the ``required`` numbers present
    and the ``positive`` ones > 0."""
    if not isinstance(value, dict):
        raise _refuse(source, key, value, 'expected a dict of numbers', _OPTIMIZER_FIX)
    for name in required:
        if not _is_real(value.get(name)):
            raise _refuse(source, f'{key}.{name}', value.get(name), 'expected a finite number', _OPTIMIZER_FIX)
    for name, number in value.items():
        if name == 'params':
            continue
        kind = _kind(number)
        if kind not in ('flag', 'number') and not kind.endswith(' numbers') or not _finite(number) \
                or (name in positive and not (_is_real(number) and number > 0)):
            raise _refuse(source, f'{key}.{name}', number, 'expected a finite number'
                          + (' > 0' if name in positive else ''), _OPTIMIZER_FIX)


def check_optimizer_state(optim_wrapper, state_dict, source: str, key: str = 'optimizer') -> list[str]:
    """Raise :class:`TrainingStateError` unless ``state_dict`` (``checkpoint['optimizer']``) fits ``optim_wrapper``:
    the same param groups with as many parameters each, every per-parameter tensor of ``ndim > 0`` of its
    parameter's shape and kind of dtype, finite scalars, hyperparameters of the same kind as this run's and equal
    flags. Kernel flags (``fused``, ``foreach``, ``capturable``, ``differentiable``) are set to this run's in place:
    how the step runs is this run's choice.

    Args:
        optim_wrapper: MMEngine's ``OptimWrapper`` (``AmpOptimWrapper``: its ``loss_scaler`` entry, finite numbers,
            scale > 0), or an ``OptimWrapperDict`` (a dict of those by name, the same names).
        state_dict: what ``optim_wrapper.state_dict()`` saved.
        source: the checkpoint's path, for messages.

    Returns:
        list[str]: the keys dropped: an empty ``loss_scaler`` (saved by a bf16 or fp32 run) resumed into an enabled
        one, which ``GradScaler.load_state_dict`` refuses with a RuntimeError; the scaler starts at its initial scale.
    """
    if isinstance(optim_wrapper, OptimWrapperDict):
        names = set(state_dict) if isinstance(state_dict, dict) else None
        if names != set(optim_wrapper.optim_wrappers):
            raise _refuse(source, key, sorted(names) if names is not None else state_dict,
                          f'this run\'s optimizers are {sorted(optim_wrapper.optim_wrappers)}', _OPTIMIZER_FIX)
        return [dropped for name, wrapper in optim_wrapper.optim_wrappers.items()
                for dropped in check_optimizer_state(wrapper, state_dict[name], source, f'{key}[{name!r}]')]
    if not isinstance(state_dict, dict):
        raise _refuse(source, key, state_dict, 'expected an optimizer state dict', _OPTIMIZER_FIX)
    dropped = []
    scaler = getattr(optim_wrapper, 'loss_scaler', None)
    if 'loss_scaler' in state_dict and scaler is not None:
        if state_dict['loss_scaler'] == {} and scaler.is_enabled():
            del state_dict['loss_scaler']
            dropped.append(f'{key}.loss_scaler (empty: saved without fp16 loss scaling; the scaler starts at its '
                           'initial scale)')
        elif scaler.is_enabled():
            _check_numbers(source, f'{key}.loss_scaler', state_dict['loss_scaler'],
                           required=('scale', 'growth_factor', 'backoff_factor', 'growth_interval'),
                           positive=('scale', 'growth_factor', 'backoff_factor', 'growth_interval'))
    if 'base_param_settings' in state_dict:
        own = getattr(optim_wrapper, 'base_param_settings', None)
        if own is None:
            raise _refuse(source, f'{key}.base_param_settings', state_dict['base_param_settings'],
                          'saved by an optimizer of several param groups; this run\'s has one', _OPTIMIZER_FIX)
        _check_numbers(source, f'{key}.base_param_settings', state_dict['base_param_settings'],
                       required=tuple(k for k, v in own.items() if k != 'params' and _kind(v) == 'number'))
    _check_torch_optimizer(optim_wrapper.optimizer, state_dict, source, key)
    return dropped


def same_run(checkpoint_path: str | None, work_dir: str) -> bool:
    """Whether the checkpoint lies in ``work_dir`` (links resolved): a checkpoint of this work dir's own run."""
    if not checkpoint_path or '://' in str(checkpoint_path):
        return False
    return inside(checkpoint_path, work_dir) and osp.realpath(checkpoint_path) != osp.realpath(work_dir)


# --- resuming with another number of processes or another batch --------------------------------------------------
#: ``meta`` keys of ``beit_mm.CheckpointGuardHook``'s record: processes, images per process per iteration, iterations
#: per optimizer update, and the images the run has trained on (nominal: iterations x processes x batch).
BATCH_KEYS = ('world_size', 'batch_size', 'accumulative_counts', 'samples_seen')
#: Parameter-scheduler state counted in iterations (``by_epoch=False``): rescaled when a resume converts iterations.
SCHEDULER_ITER_KEYS = ('begin', 'end', 'last_step', 'T_max', 'total_iters', 'step_size', 'total_steps', '_global_step')
#: MMEngine's "no end" (``mmengine.optim.scheduler.param_scheduler.INF``): never rescaled.
SCHEDULER_INF = 100000000


def batch_record(world_size: int, batch_size: int, accumulative_counts: int, samples_seen: int) -> dict:
    """What a checkpoint's ``meta`` records about the batch (:data:`BATCH_KEYS`)."""
    return dict(world_size=int(world_size), batch_size=int(batch_size), accumulative_counts=int(accumulative_counts),
                samples_seen=int(samples_seen))


def check_batch(meta: Mapping, world_size: int, batch_size: int, accumulative_counts: int, source: str,
                schedule_in_samples: bool) -> float | None:
    """Compare the batch a checkpoint was trained with (its ``meta`` record) with this run's.

    Returns:
        None when there is no record (a checkpoint written before it: resumed as it is, the caller warns) or when
        every iteration sees as many images as before; else ``ratio`` = images per iteration then / now, by which
        the caller multiplies every iteration count (``meta.iter``, the schedulers' iteration state, an iteration
        based ``max_iters``) so that the schedule continues counted in images seen.

    Raises:
        TrainingStateError: the global batch per optimizer update (processes x batch x accumulation) differs and
            ``schedule_in_samples`` is False: named with both batches and the fixes.
    """
    if not all(_is_int(meta.get(k)) and meta.get(k) > 0 for k in BATCH_KEYS[:3]):
        return None
    then = (meta['world_size'], meta['batch_size'], meta['accumulative_counts'])
    now = (world_size, batch_size, accumulative_counts)
    update_then, update_now = math.prod(then), math.prod(now)
    if update_then != update_now and not schedule_in_samples:
        per_process = update_then / (world_size * batch_size)
        fixes = []
        if per_process == int(per_process):
            fixes.append(f'--cfg-options optim_wrapper.accumulative_counts={int(per_process)} (the same global batch: '
                         f'{world_size} x {batch_size} x {int(per_process)})')
        if update_then % (world_size * accumulative_counts) == 0:
            fixes.append(f'train_dataloader.batch_size={update_then // (world_size * accumulative_counts)}')
        fixes.append(f'or pass --resume-schedule-in-samples to continue with a global batch of {update_now}, the '
                     'schedule counted in images seen (with auto_scale_lr.enable=True the lr follows the batch)')
        raise TrainingStateError(
            f'{source}: trained with a global batch of {update_then} ({then[0]} processes x {then[1]} images x '
            f'{then[2]} accumulation), this run has {update_now} ({world_size} x {batch_size} x '
            f'{accumulative_counts}): resumed as it is, it would continue the same schedule with '
            f'{update_now / update_then:g}x the batch. Fix: ' + '; '.join(fixes))
    ratio = (then[0] * then[1]) / (world_size * batch_size)
    return None if ratio == 1 else ratio


def rescale_iterations(checkpoint: dict, ratio: float) -> int:
    """Multiply the iteration counts of a loaded checkpoint by ``ratio`` in place (:func:`check_batch`):
    ``meta.iter`` and the :data:`SCHEDULER_ITER_KEYS` of every iteration-based parameter scheduler. Returns the new
    iteration."""
    def scale(value):
        return value if value >= SCHEDULER_INF else int(round(value * ratio))
    meta = checkpoint['meta']
    meta['iter'] = scale(meta['iter'])
    schedulers = checkpoint.get('param_schedulers') or []
    groups = schedulers.values() if isinstance(schedulers, Mapping) else [schedulers]
    for group in groups:
        for state in group:
            if not isinstance(state, dict) or state.get('by_epoch', True):
                continue
            for key in SCHEDULER_ITER_KEYS:
                if key == 'total_iters' and _is_int(state.get(key)):  # LinearLR, PolyLR, ...: end - begin - 1
                    state[key] = scale(state[key] + 1) - 1
                elif _is_int(state.get(key)):
                    state[key] = scale(state[key])
    return meta['iter']
