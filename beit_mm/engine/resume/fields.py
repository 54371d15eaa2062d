"""The resume allow-list (what MMEngine 0.10.7's Runner and hooks, and beit_mm's hooks, read from a checkpoint), the
bounds of what they may hold, and the value tests every resume check shares."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

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
