"""Resuming a checkpoint: every field MMEngine and beit_mm read from it, validated against this run in one pass.

MMEngine 0.10.7's ``Runner.resume`` trusts what a checkpoint carries, and a checkpoint is a file from whoever made it.
``Runner.load_checkpoint`` opens it and calls ``after_load_checkpoint`` first (``beit_mm.CheckpointGuardHook``,
priority ``HIGHEST``, runs :func:`validate_resume` there); only then do ``EMAHook`` (which swaps ``ema_state_dict`` into
``state_dict``), the model load, the loop counters, the seed, the message hub, the optimizer and the parameter
schedulers use it. What each of them reads is in :data:`CHECKPOINT_FIELDS`, :data:`META_FIELDS`,
:data:`MESSAGE_HUB_FIELDS` and :data:`RUNTIME_INFO_FIELDS` (``tests/engine/test_resume.py`` reads MMEngine's source and
fails when a reader is missing here). Everything else is removed from the checkpoint before any of them sees it.

The invariants, each checked after every conversion (``--resume-schedule-in-samples``) against this run:

- **counters**: ``meta.iter`` an int in [0, ``max_iters``], ``meta.epoch`` in [0, ``max_epochs``] of this run's
  (converted) schedule; the batch record (processes, images per process, accumulation) ints in [1, 2**16], its
  conversion ratio in [1/1024, 1024]; ``meta.seed`` in [0, 2**32 - 1]; generator states the generators accept;
- **tensors**: ``state_dict`` and ``ema_state_dict`` hold exactly this run's model's (and its EMA model's) keys, each a
  dense tensor inside its storage, of the model's shape and kind of dtype, finite; every optimizer state tensor has
  its parameter's shape, kind of dtype and strides, dense inside its storage (a stride-0 ``exp_avg`` made the fused
  AdamW write past its storage), finite;
- **optimizer and schedulers**: the same param groups with as many parameters, hyperparameters of this run's kinds;
  kernel flags this run's; parameter schedulers as many as this run's, each with this run's keys, every setting but
  the counters equal to this run's (``param_name``, ``by_epoch``, factors, ...: a ``param_name`` of the file scheduled
  weight decay instead of the lr), counters and iteration spans ints within the schedule;
- **message hub**: only the runtime values ``CheckpointHook`` reads: ``best_ckpt``/``best_ckpt_<metric>`` and
  ``last_ckpt`` kept only when they name a regular file of this work dir's own checkpoints (MMEngine removes what
  ``best_ckpt`` names, ``rmtree`` for a folder), ``keep_ckpt_ids`` only distinct ints up to the checkpoint's step,
  all three only from a checkpoint the work dir's runs wrote (recorded with its sha256 when written),
  ``best_score``/``best_score_<metric>`` a finite number of magnitude <= 1e15 (refused otherwise); log scalars rebuilt
  from finite numeric histories.

A refusal is a :class:`TrainingStateError` naming the file, the key, the value and the fix; what is dropped is
returned, for one warning. docs/faults.md, "What a resumed checkpoint can steer".
"""
from __future__ import annotations

import math
import numbers
import os.path as osp
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from mmengine.hooks import EMAHook
from mmengine.logging import HistoryBuffer
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapperDict
from mmengine.optim.scheduler.param_scheduler import INF as SCHEDULER_INF
from mmengine.runner import IterBasedTrainLoop, Runner
from torch import Tensor

from beit_mm.fileio.paths import inside
from beit_mm.fileio.work_dir import recorded_file

# --- the allow-list: what MMEngine 0.10.7's Runner and hooks, and beit_mm's hooks, read from a checkpoint ------------
#: top-level keys: Runner.resume (meta, message_hub, optimizer, param_schedulers), _load_checkpoint_to_model
#: (state_dict), EMAHook.after_load_checkpoint (ema_state_dict), beit_mm.RNGStateHook (rng_states).
CHECKPOINT_FIELDS = ('meta', 'state_dict', 'message_hub', 'optimizer', 'param_schedulers', 'ema_state_dict',
                     'rng_states')
#: ``meta`` keys: Runner.resume (epoch, iter, seed, dataset_meta), beit_mm.CheckpointGuardHook (the batch record),
#: beit_mm.DenseProbeHook (dense_probe). ``meta.config``/``meta.cfg`` (config source MMEngine would run) are dropped.
BATCH_KEYS = ('world_size', 'batch_size', 'accumulative_counts', 'samples_seen')
META_FIELDS = ('epoch', 'iter', 'seed', 'dataset_meta', *BATCH_KEYS, 'dense_probe')
#: ``meta`` keys MMEngine reads that are dropped on purpose, without a word (every checkpoint has one): config source
#: ``Runner.resume`` would run (``Config.fromstring``); the file room drops them on opening already.
META_DROPPED = ('config', 'cfg')
#: ``meta`` keys ``Runner.save_checkpoint`` writes that nothing reads on resume: dropped without a word.
META_UNREAD = ('experiment_name', 'time', 'mmengine_version')
#: ``optimizer`` keys: OptimWrapper/AmpOptimWrapper.load_state_dict (loss_scaler, base_param_settings) and
#: torch.optim.Optimizer.load_state_dict (state, param_groups).
OPTIMIZER_FIELDS = ('state', 'param_groups', 'loss_scaler', 'base_param_settings')
#: ``message_hub`` keys: MessageHub.load_state_dict.
MESSAGE_HUB_FIELDS = ('log_scalars', 'runtime_info', 'resumed_keys')
#: ``message_hub.runtime_info`` keys read after the hub is loaded: CheckpointHook.before_train (best_ckpt,
#: best_ckpt_<metric>, keep_ckpt_ids) and _save_best_checkpoint (best_score, best_score_<metric>); beit_mm's
#: AtomicCheckpointHook writes last_ckpt (MMEngine's publishes it after training).
RUNTIME_INFO_FIELDS = ('best_ckpt', 'best_score', 'keep_ckpt_ids', 'last_ckpt')
RUNTIME_INFO_PREFIXES = ('best_ckpt_', 'best_score_')
#: ``runtime_info`` keys this run writes before anything reads them (RuntimeInfoHook.before_run/before_train/
#: after_*_epoch, IterTimerHook's eta): the checkpoint's are dropped without a word.
RUNTIME_INFO_REWRITTEN = ('cfg', 'seed', 'experiment_name', 'mmengine_version', 'loop_stage', 'epoch', 'iter',
                          'max_epochs', 'max_iters', 'dataset_meta', 'eta')
RUNTIME_INFO_REWRITTEN_PREFIXES = ('train/', 'val/', 'test/')
#: Parameter-scheduler state a resumed run continues from (everything else a scheduler keeps is its settings, which
#: must equal this run's): the step counters and the values the schedule starts from and last set.
SCHEDULER_STATE_KEYS = ('last_step', '_global_step', 'base_values', '_last_value')
#: Parameter-scheduler spans counted in iterations (``by_epoch=False``): converted with the schedule, bounded after.
SCHEDULER_ITER_KEYS = ('begin', 'end', 'T_max', 'total_iters', 'step_size', 'total_steps')

#: ``np.random.seed`` takes seeds in [0, 2**32 - 1]; MMEngine seeds numpy with the run seed.
MAX_SEED = 2**32 - 1
#: Processes, images per process, accumulation a checkpoint may record (each); and how far a resume may convert.
MAX_BATCH_RECORD = 2**16
MAX_CONVERSION = 1024
#: A best score (a metric, a loss) beyond this is no measurement; it would stop every later best save.
MAX_SCORE = 1e15
#: Log histories kept per scalar (HistoryBuffer's default max_length is 10**6).
MAX_LOG_HISTORY = 10**6
#: The Mersenne Twister keeps 624 32-bit words (numpy's ``MT19937`` and python's ``random``); the position is 0..624.
MT_WORDS = 624
#: ``random.getstate()`` version of CPython 3.
PYTHON_RANDOM_VERSION = 3
#: What ``beit_mm.engine.hooks.rng_state.capture_rng_state`` saves for each process.
RNG_STATE_KEYS = ('torch', 'cuda', 'numpy', 'python')
#: Param-group flags that say how the optimizer step runs, not what it computes: always this run's.
KERNEL_FLAGS = ('fused', 'foreach', 'capturable', 'differentiable')
#: Plain values (``meta.dataset_meta``, ``meta.dense_probe``): nesting depth and number of items at most.
MAX_PLAIN_DEPTH, MAX_PLAIN_ITEMS = 8, 100_000


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
    """A finite real number (not a bool; an int of any size)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and (
        isinstance(value, numbers.Integral) or math.isfinite(value))


def _bounded_int(value, low: int, high: int) -> bool:
    return _is_int(value) and low <= value <= high


def is_dense(tensor: Tensor) -> bool:
    """Whether ``tensor`` is dense and inside its storage: its strides, sorted, are those of a contiguous tensor in
    some dimension order (no stride 0, no overlap, no gap), and its elements end within the storage's bytes."""
    expected = 1
    for stride, size in sorted((s, n) for s, n in zip(tensor.stride(), tensor.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    end = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
    return tensor.storage_offset() >= 0 and end <= tensor.untyped_storage().nbytes()


def _finite(value) -> bool:
    if isinstance(value, Tensor):
        return not value.is_floating_point() and not value.is_complex() or bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return all(_finite(v) for v in value)
    return not isinstance(value, numbers.Real) or isinstance(value, bool) or _is_real(value)


def _plain(value, depth: int = 0, budget: list | None = None) -> bool:
    """A plain bounded value: None, bools, finite numbers, str, and lists/tuples/dicts (str keys) of them, at most
    :data:`MAX_PLAIN_DEPTH` deep and :data:`MAX_PLAIN_ITEMS` items in all."""
    budget = [MAX_PLAIN_ITEMS] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_PLAIN_DEPTH:
        return False
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, numbers.Real):
        return _is_real(value) and abs(value) <= 2**63
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1, budget) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1, budget) for k, v in value.items())
    return False


def _keep_only(mapping: dict, allowed, where: str, dropped: list, quiet: tuple = ()) -> None:
    """Remove, in place, the keys of ``mapping`` not in ``allowed``; each is listed in ``dropped`` unless ``quiet``."""
    for key in list(mapping):
        if key not in allowed:
            del mapping[key]
            if key not in quiet:
                dropped.append(f'{where}{key} (not on the allow-list)')


# --- counters, seed, generator states -------------------------------------------------------------------------------
def check_counters(meta: Mapping, source: str, max_iters: int, max_epochs: int) -> None:
    """``meta.iter`` in [0, max_iters] and ``meta.epoch`` in [0, max_epochs], ints (the schedule of this run, after
    any conversion).

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
    """A dense int64 tensor of ``length`` Mersenne Twister words, each in [0, 2**32 - 1]."""
    if not (isinstance(words, Tensor) and words.dtype == torch.int64 and tuple(words.shape) == (length,)
            and is_dense(words)):
        raise _refuse(source, key, words, f'expected a dense int64 tensor of shape ({length},)', _RNG_FIX)
    if length and not (int(words.min()) >= 0 and int(words.max()) <= MAX_SEED):
        raise _refuse(source, key, words, 'holds words outside [0, 2**32 - 1]', _RNG_FIX)


def _check_generator(source: str, key: str, state, device: str) -> None:
    """A generator state torch's own generator of ``device`` accepts (tried on a scratch generator)."""
    own = torch.get_rng_state() if device == 'cpu' else torch.cuda.get_rng_state()
    if not (isinstance(state, Tensor) and state.dtype == torch.uint8 and tuple(state.shape) == tuple(own.shape)
            and is_dense(state)):
        raise _refuse(source, key, state, f'expected a dense uint8 tensor of shape {tuple(own.shape)} (torch\'s '
                      f'{device} generator state)', _RNG_FIX)
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
        elif not (isinstance(cuda, Tensor) and cuda.dtype == torch.uint8 and cuda.ndim == 1 and is_dense(cuda)):
            raise _refuse(source, f"{key}['cuda']", cuda, 'expected None or a dense uint8 tensor', _RNG_FIX)
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
    if not isinstance(states, (list, tuple)) or len(states) > MAX_BATCH_RECORD:
        raise _refuse(source, 'rng_states', states, 'expected a list indexed by rank', _RNG_FIX)
    for rank, state in enumerate(states):
        if state is not None:
            check_rng_state(state, source, f'rng_states[{rank}]')


# --- the message hub ------------------------------------------------------------------------------------------------
def _own_checkpoint_file(path, work_dir: str, prefix: str) -> bool:
    """Whether ``path`` is a regular file (not a link, not a folder) directly inside ``work_dir`` whose name starts
    with ``prefix`` and ends with ``.pth``: one of this work dir's own checkpoint files."""
    if not isinstance(path, str) or not path or '://' in path or '\0' in path:
        return False
    name = osp.basename(path)
    return (osp.realpath(osp.dirname(osp.abspath(path))) == osp.realpath(work_dir) and name.startswith(prefix)
            and name.endswith('.pth') and osp.isfile(path) and not osp.islink(path))


def _check_score(source: str, key: str, value) -> None:
    if not (_is_real(value) and abs(value) <= MAX_SCORE):
        raise _refuse(source, f'message_hub.runtime_info.{key}', value, 'CheckpointHook compares every validation '
                      f'score with it: it must be a finite number of magnitude <= {MAX_SCORE:g}',
                      'resume from a checkpoint tools/train.py wrote, or remove the key from the checkpoint '
                      '(the next validation then sets the best score)')


def clean_runtime_info(runtime_info: dict, source: str, work_dir: str, same_run: bool, last_step: int) -> list[str]:
    """Keep, in place, only the :data:`RUNTIME_INFO_FIELDS` a resumed run's hooks read, each valid; returns what was
    dropped, each with why.

    ``best_ckpt``/``best_ckpt_<metric>`` and ``last_ckpt`` are kept only when ``same_run`` (the checkpoint is one the
    runs of ``work_dir`` wrote: :func:`same_run`) and they name a regular file directly in ``work_dir``
    (``best_*.pth``, ``*.pth``); ``keep_ckpt_ids`` only when ``same_run`` and a list of distinct ints in [0,
    ``last_step``]. A checkpoint from elsewhere steers no
    file: its best checkpoint is not removed when a better one is saved, and the rotation starts with this run's saves.

    Raises:
        TrainingStateError: a ``best_score``/``best_score_<metric>`` that is not a finite number of bounded size.
    """
    dropped = []
    for key in list(runtime_info):
        value = runtime_info[key]
        if not isinstance(key, str):
            keep, why = False, 'not a name'
        elif key in ('best_ckpt', 'last_ckpt') or key.startswith('best_ckpt_'):
            keep = same_run and _own_checkpoint_file(value, work_dir, 'best_' if key.startswith('best') else '')
            why = 'names no checkpoint file of this work dir\'s own'
        elif key == 'keep_ckpt_ids':
            keep = (same_run and isinstance(value, list) and len(set(value)) == len(value)
                    and all(_bounded_int(step, 0, last_step) for step in value))
            why = 'not this work dir\'s own checkpoints'
        elif key == 'best_score' or key.startswith('best_score_'):
            _check_score(source, key, value)
            continue
        elif key in RUNTIME_INFO_REWRITTEN or key.startswith(RUNTIME_INFO_REWRITTEN_PREFIXES):
            del runtime_info[key]  # this run writes its own before anything reads it
            continue
        else:
            keep, why = False, 'nothing reads it'
        if not keep:
            del runtime_info[key]
            dropped.append(f'message_hub.runtime_info.{key} ({why})')
    return dropped


def _clean_log_scalars(log_scalars: dict, dropped: list) -> None:
    """Rebuild, in place, every ``HistoryBuffer`` from its histories (finite numbers, as many counts as values, at
    most :data:`MAX_LOG_HISTORY`); anything else is dropped."""
    for key in list(log_scalars):
        value = log_scalars[key]
        history = getattr(value, '_log_history', None) if isinstance(value, HistoryBuffer) else None
        counts = getattr(value, '_count_history', None) if isinstance(value, HistoryBuffer) else None
        ok = (isinstance(key, str) and isinstance(history, np.ndarray) and isinstance(counts, np.ndarray)
              and history.ndim == counts.ndim == 1 and history.shape == counts.shape
              and history.size <= MAX_LOG_HISTORY and history.dtype.kind in 'iuf' and counts.dtype.kind in 'iu'
              and bool(np.isfinite(history).all()) and bool((counts >= 0).all()))
        if ok:
            log_scalars[key] = HistoryBuffer(history.tolist(), counts.tolist(), MAX_LOG_HISTORY)
        else:
            del log_scalars[key]
            dropped.append(f'message_hub.log_scalars.{key} (not a history of finite numbers)')


def clean_message_hub(hub, source: str, work_dir: str, same_run: bool, last_step: int) -> list[str]:
    """``checkpoint['message_hub']``: ``MessageHub.state_dict()``'s three dicts, cleaned in place
    (:func:`clean_runtime_info`, log scalars rebuilt, ``resumed_keys`` bools of the keys kept)."""
    if not (isinstance(hub, dict) and all(isinstance(hub.get(k), dict) for k in MESSAGE_HUB_FIELDS)):
        raise _refuse(source, 'message_hub', hub, 'expected MessageHub.state_dict(): a dict of the dicts '
                      'log_scalars, runtime_info and resumed_keys', 'resume from a checkpoint tools/train.py wrote')
    dropped = []
    _keep_only(hub, MESSAGE_HUB_FIELDS, 'message_hub.', dropped)
    dropped += clean_runtime_info(hub['runtime_info'], source, work_dir, same_run, last_step)
    _clean_log_scalars(hub['log_scalars'], dropped)
    kept = set(hub['runtime_info']) | set(hub['log_scalars'])
    hub['resumed_keys'] = {k: v for k, v in hub['resumed_keys'].items() if k in kept and isinstance(v, bool)}
    return dropped


# --- weights --------------------------------------------------------------------------------------------------------
_WEIGHTS_FIX = ('resume with the config this checkpoint was trained with (the same model), or start a new run from '
                'its weights: --cfg-options load_from=CHECKPOINT (no --resume)')


def check_tensors(own: Mapping[str, Tensor], saved, source: str, key: str) -> None:
    """``saved`` holds exactly the keys of ``own``, each a dense tensor inside its storage of the same shape and kind
    of dtype (floating, complex, integer, bool), finite where floating.

    Raises:
        TrainingStateError: naming up to 3 keys missing or unexpected, or the first tensor that differs.
    """
    if not isinstance(saved, Mapping) or not all(isinstance(k, str) for k in saved):
        raise _refuse(source, key, saved, 'expected a dict of tensors by name', _WEIGHTS_FIX)
    missing, unexpected = [k for k in own if k not in saved], [k for k in saved if k not in own]
    if missing or unexpected:
        raise _refuse(source, key, f'{len(saved)} tensors', f'{len(missing)} of this run\'s keys missing '
                      f'{missing[:3]}, {len(unexpected)} unexpected {unexpected[:3]}', _WEIGHTS_FIX)
    for name, target in own.items():
        value = saved[name]
        kind = (target.is_floating_point(), target.is_complex(), target.dtype == torch.bool)
        if not isinstance(value, Tensor) or tuple(value.shape) != tuple(target.shape) \
                or (value.is_floating_point(), value.is_complex(), value.dtype == torch.bool) != kind:
            raise _refuse(source, f'{key}[{name!r}]', value, f'this run\'s model has a {_show(target)}', _WEIGHTS_FIX)
        if not is_dense(value):
            raise _refuse(source, f'{key}[{name!r}]', value, f'strides {value.stride()} at offset '
                          f'{value.storage_offset()} over {value.untyped_storage().nbytes()} storage bytes: not dense '
                          'inside its storage', _WEIGHTS_FIX)
        if not _finite(value):
            raise _refuse(source, f'{key}[{name!r}]', value, 'holds NaN or inf', _WEIGHTS_FIX)


def _revised(state_dict) -> dict:
    """The state dict as MMEngine's ``_load_checkpoint_to_model`` revises it (``^module.`` removed)."""
    if not isinstance(state_dict, Mapping):
        return state_dict
    return {re.sub(r'^module.', '', k) if isinstance(k, str) else k: v for k, v in state_dict.items()}


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


def _strides(tensor: Tensor) -> tuple[int, ...]:
    """The strides of the dimensions of size > 1 (a size-1 dimension's stride is never stepped over)."""
    return tuple(s for s, n in zip(tensor.stride(), tensor.shape) if n != 1)


def _check_param_state(source: str, key: str, param: Tensor, state) -> None:
    """One parameter's state: tensors of the parameter's shape, kind of dtype and strides (``ndim > 0``), dense inside
    their storage and finite; finite real scalars (``step``); finite numbers or None."""
    if not isinstance(state, dict) or not all(isinstance(name, str) for name in state):
        raise _refuse(source, key, state, 'expected a dict of tensors by name', _OPTIMIZER_FIX)
    for name, value in state.items():
        if isinstance(value, Tensor) and value.ndim > 0:
            if tuple(value.shape) != tuple(param.shape):
                raise _refuse(source, f'{key}[{name!r}]', value, f'its parameter has shape {tuple(param.shape)} '
                              '(a fused optimizer would read and write out of bounds)', _OPTIMIZER_FIX)
            if (value.is_floating_point(), value.is_complex()) != (param.is_floating_point(), param.is_complex()):
                raise _refuse(source, f'{key}[{name!r}]', value, f'its parameter is {param.dtype}', _OPTIMIZER_FIX)
            if not is_dense(value) or _strides(value) != _strides(param):
                raise _refuse(source, f'{key}[{name!r}]', value, f'strides {value.stride()} at offset '
                              f'{value.storage_offset()} over {value.untyped_storage().nbytes()} storage bytes; its '
                              f'parameter\'s strides are {param.stride()} (a fused optimizer steps over the '
                              'parameter\'s memory layout and would write past the storage)', _OPTIMIZER_FIX)
            if not _finite(value):
                raise _refuse(source, f'{key}[{name!r}]', value, 'holds NaN or inf', _OPTIMIZER_FIX)
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
    names = None
    for param_id, state in state_dict['state'].items():
        if param_id not in params:
            raise _refuse(source, f'{key}.state', param_id, 'state for a parameter id no param group lists',
                          _OPTIMIZER_FIX)
        _check_param_state(source, f'{key}.state[{param_id}]', params[param_id], state)
        if names is not None and set(state) != names:  # the step reads every entry the optimizer wrote
            raise _refuse(source, f'{key}.state[{param_id}]', sorted(state), f'the other parameters\' state has '
                          f'{sorted(names)}', _OPTIMIZER_FIX)
        names = set(state)


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
    parameter's shape, kind of dtype and strides, dense inside its storage and finite, the same state entries for
    every parameter, finite scalars, hyperparameters of the same kind as this run's and equal flags. Kernel flags
    (``fused``, ``foreach``, ``capturable``, ``differentiable``) are set to this run's in place: how the step runs is
    this run's choice.

    Args:
        optim_wrapper: MMEngine's ``OptimWrapper`` (``AmpOptimWrapper``: its ``loss_scaler`` entry, finite numbers,
            scale > 0), or an ``OptimWrapperDict`` (a dict of those by name, the same names).
        state_dict: what ``optim_wrapper.state_dict()`` saved.
        source: the checkpoint's path, for messages.

    Returns:
        list[str]: the keys dropped: an empty ``loss_scaler`` (saved by a bf16 or fp32 run) resumed into an enabled
        one, which ``GradScaler.load_state_dict`` refuses with a RuntimeError; the scaler starts at its initial scale;
        entries the wrapper does not read.
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
    _keep_only(state_dict, OPTIMIZER_FIELDS, f'{key}.', dropped)
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


# --- parameter schedulers -------------------------------------------------------------------------------------------
_SCHEDULER_FIX = ('resume with the param_scheduler of the config this checkpoint was trained with, or start a new '
                  'run from its weights: --cfg-options load_from=CHECKPOINT (no --resume)')


def _same_setting(mine, theirs) -> bool:
    """Equal values of equal kinds (a bool is not a number; 0 and 0.0 are the same number)."""
    if isinstance(mine, bool) or isinstance(theirs, bool) or mine is None or theirs is None:
        return type(mine) is type(theirs) and mine == theirs
    if isinstance(mine, numbers.Real) and isinstance(theirs, numbers.Real):
        return mine == theirs
    if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
        return len(mine) == len(theirs) and all(_same_setting(a, b) for a, b in zip(mine, theirs))
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return mine.keys() == theirs.keys() and all(_same_setting(mine[k], theirs[k]) for k in mine)
    return type(mine) is type(theirs) and mine == theirs


def _check_scheduler(scheduler, saved, source: str, key: str, max_iters: int, max_epochs: int) -> list[str]:
    """One scheduler's saved state against this run's ``scheduler``: its keys only (others dropped), every setting
    equal to this run's, the counters and iteration spans ints within the schedule, the values finite, one per param
    group."""
    if not isinstance(saved, dict):
        raise _refuse(source, key, saved, f'expected the state dict of this run\'s {type(scheduler).__name__}',
                      _SCHEDULER_FIX)
    own = scheduler.state_dict()
    dropped = []
    _keep_only(saved, own, f'{key}.', dropped)
    groups = len(own.get('base_values', ()))
    for name, value in saved.items():
        where = f'{key}.{name}'
        if name in ('base_values', '_last_value'):
            if not (isinstance(value, list) and len(value) == groups and all(_is_real(v) for v in value)):
                raise _refuse(source, where, value, f'expected {groups} finite numbers (one per param group)',
                              _SCHEDULER_FIX)
        elif name in ('last_step', '_global_step') or name in SCHEDULER_ITER_KEYS and not own.get('by_epoch', True):
            high = (max_epochs if own.get('by_epoch', True) else max_iters) + 1
            low = -1 if name == 'last_step' else 0
            if name in SCHEDULER_ITER_KEYS:
                high = max(SCHEDULER_INF, high)
            if not _bounded_int(value, low, high):
                raise _refuse(source, where, value, f'an int in [{low}, {high}] for this schedule', _SCHEDULER_FIX)
        elif not _same_setting(own[name], value):
            raise _refuse(source, where, value, f'this run\'s {type(scheduler).__name__} has {name}={own[name]!r}: a '
                          'resumed scheduler continues this run\'s schedule, not another one', _SCHEDULER_FIX)
    return dropped


def check_param_schedulers(schedulers, saved, source: str, max_iters: int, max_epochs: int) -> list[str]:
    """``checkpoint['param_schedulers']`` against this run's built schedulers (a list, or a dict of lists by
    optimizer name): as many, each :func:`_check_scheduler`."""
    if isinstance(schedulers, dict):
        if not isinstance(saved, dict) or set(saved) != set(schedulers):
            raise _refuse(source, 'param_schedulers', sorted(saved) if isinstance(saved, dict) else saved,
                          f'this run schedules the optimizers {sorted(schedulers)}', _SCHEDULER_FIX)
        pairs = [(f'param_schedulers[{name!r}]', schedulers[name], saved[name]) for name in schedulers]
    else:
        pairs = [('param_schedulers', schedulers, saved)]
    dropped = []
    for key, own, theirs in pairs:
        if not isinstance(theirs, list) or len(theirs) != len(own):
            raise _refuse(source, key, theirs, f'this run has {len(own)} parameter schedulers '
                          f'({", ".join(type(s).__name__ for s in own)})', _SCHEDULER_FIX)
        for index, (scheduler, state) in enumerate(zip(own, theirs)):
            dropped += _check_scheduler(scheduler, state, source, f'{key}[{index}]', max_iters, max_epochs)
    return dropped


# --- resuming with another number of processes or another batch --------------------------------------------------
def batch_record(world_size: int, batch_size: int, accumulative_counts: int, samples_seen: int) -> dict:
    """What a checkpoint's ``meta`` records about the batch (:data:`BATCH_KEYS`)."""
    return dict(world_size=int(world_size), batch_size=int(batch_size), accumulative_counts=int(accumulative_counts),
                samples_seen=int(samples_seen))


def check_batch_record(meta: Mapping, source: str) -> bool:
    """Whether ``meta`` has the batch record (:data:`BATCH_KEYS`); when it has, each entry bounded: processes, images
    per process and accumulation ints in [1, 2**16], images seen an int >= 0.

    Raises:
        TrainingStateError: an entry out of bounds, or a record with some of the entries only.
    """
    present = [k for k in BATCH_KEYS if k in meta]
    if not present:
        return False
    for key in BATCH_KEYS:
        ok = _bounded_int(meta.get(key), 0, 2**62) if key == 'samples_seen' else \
            _bounded_int(meta.get(key), 1, MAX_BATCH_RECORD)
        if not ok:
            raise _refuse(source, f'meta.{key}', meta.get(key), 'the batch record holds ints, processes, images per '
                          f'process and accumulation in [1, {MAX_BATCH_RECORD}]', 'resume from a checkpoint '
                          'tools/train.py wrote, or start a new run from its weights: --cfg-options '
                          'load_from=CHECKPOINT')
    return True


def check_batch(meta: Mapping, world_size: int, batch_size: int, accumulative_counts: int, source: str,
                schedule_in_samples: bool) -> float | None:
    """Compare the batch a checkpoint was trained with (its ``meta`` record, :func:`check_batch_record`) with this
    run's.

    Returns:
        None when every iteration sees as many images as before; else ``ratio`` = images per iteration then / now,
        by which the caller multiplies every iteration count (:func:`rescale_iterations`, an iteration based
        ``max_iters``) so that the schedule continues counted in images seen.

    Raises:
        TrainingStateError: the global batch per optimizer update (processes x batch x accumulation) differs and
            ``schedule_in_samples`` is False: named with both batches and the fixes; or a conversion by more than
            :data:`MAX_CONVERSION` either way.
    """
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
    if not 1 / MAX_CONVERSION <= ratio <= MAX_CONVERSION:
        raise _refuse(source, 'meta.world_size x meta.batch_size', then[0] * then[1],
                      f'{ratio:g}x the images per iteration of this run ({world_size} x {batch_size}): converting the '
                      f'schedule by more than {MAX_CONVERSION}x either way would replay and train that many times the '
                      'batches', 'resume on a number of processes and batch nearer the checkpoint\'s, or start a new '
                      'run from its weights: --cfg-options load_from=CHECKPOINT')
    return None if ratio == 1 else ratio


def rescale_iterations(checkpoint: dict, ratio: float) -> int:
    """Multiply the iteration counts of a loaded checkpoint by ``ratio`` in place (:func:`check_batch`):
    ``meta.iter`` and the ``last_step``, ``_global_step`` and :data:`SCHEDULER_ITER_KEYS` of every iteration-based
    parameter scheduler (MMEngine's ``INF`` stays). Returns the new iteration."""
    def scale(value):
        return value if value >= SCHEDULER_INF else int(round(value * ratio))
    meta = checkpoint['meta']
    meta['iter'] = scale(meta['iter'])
    schedulers = checkpoint.get('param_schedulers') or []
    groups = schedulers.values() if isinstance(schedulers, Mapping) else [schedulers]
    for group in groups:
        for state in group if isinstance(group, list) else ():
            if not isinstance(state, dict) or state.get('by_epoch', True) is not False:
                continue
            for key in ('last_step', '_global_step', *SCHEDULER_ITER_KEYS):
                if key == 'total_iters' and _is_int(state.get(key)):  # LinearLR, PolyLR, ...: end - begin - 1
                    state[key] = scale(state[key] + 1) - 1
                elif _is_int(state.get(key)) and state[key] >= 0:
                    state[key] = scale(state[key])
    return meta['iter']


def same_run(checkpoint_path: str | None, work_dir: str) -> bool:
    """Whether the checkpoint is one this work dir's own runs wrote: it lies in ``work_dir`` (links resolved) and its
    folder's manifest lists it with its present content (``beit_mm.AtomicCheckpointHook`` records every checkpoint it
    writes: :func:`beit_mm.fileio.work_dir.recorded_file`). A file placed there by anyone else names no file to
    delete."""
    if not checkpoint_path or '://' in str(checkpoint_path):
        return False
    return (inside(checkpoint_path, work_dir) and osp.realpath(checkpoint_path) != osp.realpath(work_dir)
            and recorded_file(osp.dirname(osp.abspath(checkpoint_path)), osp.basename(checkpoint_path)))


# --- the one pass ---------------------------------------------------------------------------------------------------
@dataclass
class ResumeReport:
    """What :func:`validate_resume` did besides checking: the entries dropped (each with why), the batch record
    (None when the checkpoint has none), and the conversion of iteration counts (``ratio`` None when none)."""

    dropped: list[str] = field(default_factory=list)
    record: tuple[int, int, int] | None = None
    samples_seen: int = 0
    ratio: float | None = None
    iter_before: int = 0
    iter_after: int = 0


def batch_now(runner) -> tuple[int, int, int]:
    """(processes, images per process per iteration, iterations per optimizer update) of this run."""
    from mmengine.dist import get_world_size
    wrapper = runner.optim_wrapper
    counts = wrapper.get('accumulative_counts', 1) if isinstance(wrapper, dict) else \
        getattr(wrapper, '_accumulative_counts', 1)
    return get_world_size(), int(runner.train_dataloader.batch_size), int(counts)


def _model(runner) -> torch.nn.Module:
    return runner.model.module if is_model_wrapper(runner.model) else runner.model


def validate_resume(runner, checkpoint: dict, source: str, schedule_in_samples: bool = False) -> ResumeReport:
    """Validate and clean, in place, a checkpoint ``runner`` resumes from, as a whole, before anything uses it (the
    module docstring lists the invariants): fields off the allow-list dropped; the batch record compared with this
    run's and the iteration counts converted (an ``IterBasedTrainLoop``'s ``max_iters`` too); then everything checked
    against this run's converted schedule, model, EMA model, optimizer and schedulers.

    Args:
        runner: MMEngine's ``Runner`` in ``after_load_checkpoint`` of a resume (its hooks' ``before_run`` done). Under
            another runner (``FlexibleRunner``: FSDP, DeepSpeed), the strategy loads the weights, optimizer and
            schedulers in its own layout: those are left to it; the rest is checked.
        checkpoint: the opened checkpoint.
        source: its path, for messages.
        schedule_in_samples: ``--resume-schedule-in-samples``: another global batch is converted, not refused.

    Raises:
        TrainingStateError: the first field that does not fit, named with the file, the key, the value and the fix.
    """
    report = ResumeReport()
    _keep_only(checkpoint, CHECKPOINT_FIELDS, '', report.dropped)
    meta = checkpoint.get('meta')
    if not isinstance(meta, dict):
        raise _refuse(source, 'meta', meta, 'a training checkpoint keeps its iteration and seed in a dict',
                      'resume from a checkpoint tools/train.py wrote')
    _keep_only(meta, META_FIELDS, 'meta.', report.dropped, quiet=META_UNREAD + META_DROPPED)
    for key in ('dataset_meta', 'dense_probe'):
        if key in meta and not _plain(meta[key]):
            del meta[key]
            report.dropped.append(f'meta.{key} (not plain values of bounded size)')
    check_seed(meta.get('seed'), source)
    for key in ('iter', 'epoch'):
        if not _bounded_int(meta.get(key), 0, 2**62):
            raise _refuse(source, f'meta.{key}', meta.get(key), 'a resumed run continues at this count, an int >= 0',
                          'resume from a checkpoint tools/train.py wrote')
    training = getattr(runner.train_loop, 'dataloader', None) is not None
    if check_batch_record(meta, source) and training:
        world_size, batch_size, counts = batch_now(runner)
        report.record = (meta['world_size'], meta['batch_size'], meta['accumulative_counts'])
        report.ratio = check_batch(meta, world_size, batch_size, counts, source, schedule_in_samples)
        report.samples_seen = meta['samples_seen']
        report.iter_before = meta['iter']
        if report.ratio is not None:
            rescale_iterations(checkpoint, report.ratio)
            if isinstance(runner.train_loop, IterBasedTrainLoop):
                runner.train_loop._max_iters = int(round(runner.train_loop._max_iters * report.ratio))
        report.iter_after = meta['iter']
    # every check below sees the converted counts and this run's converted schedule
    max_iters, max_epochs = runner.max_iters, runner.max_epochs
    check_counters(meta, source, max_iters, max_epochs)
    check_rng_states(checkpoint.get('rng_states'), source)
    report.dropped += clean_message_hub(checkpoint.get('message_hub'), source, runner.work_dir,
                                        same_run(source, runner.work_dir), max(meta['iter'], meta['epoch']))
    if not isinstance(runner, Runner):
        return report  # FlexibleRunner: the strategy loads weights, optimizer and schedulers in its own layout
    model = _model(runner)
    own = model.state_dict()
    check_tensors(own, _revised(checkpoint.get('state_dict')), source, 'state_dict')
    emas = [hook for hook in runner.hooks if isinstance(hook, EMAHook)]
    if 'ema_state_dict' in checkpoint:
        if not emas:
            raise _refuse(source, 'ema_state_dict', f'{len(checkpoint["ema_state_dict"])} tensors', 'saved by a run '
                          'with an EMA (its state_dict holds the EMA weights): this run has no EMAHook and would '
                          'continue from the EMA weights', 'resume with --ema (or the config\'s EMAHook)')
        check_tensors(emas[0].ema_model.state_dict(), checkpoint['ema_state_dict'], source, 'ema_state_dict')
        steps = checkpoint['ema_state_dict'].get('steps')
        if steps is not None and not (steps.ndim == 0 and not steps.is_floating_point()
                                      and 0 <= int(steps) <= max_iters):
            raise _refuse(source, "ema_state_dict['steps']", steps, f'the EMA\'s update count, an int in '
                          f'[0, {max_iters}]', _WEIGHTS_FIX)
    if 'optimizer' in checkpoint:  # Runner.resume builds the wrapper next; built, it is returned as it is
        runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
        report.dropped += check_optimizer_state(runner.optim_wrapper, checkpoint['optimizer'], source)
    if 'param_schedulers' in checkpoint:
        if runner.param_schedulers is None:  # Runner.resume skips them then
            del checkpoint['param_schedulers']
        else:
            runner.param_schedulers = runner.build_param_scheduler(runner.param_schedulers)
            report.dropped += check_param_schedulers(runner.param_schedulers, checkpoint['param_schedulers'], source,
                                                     max_iters, max_epochs)
    return report
