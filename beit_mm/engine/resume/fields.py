"""The resume allow-list (what MMEngine's Runner and hooks and beit_mm's hooks read), its bounds and value tests."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

#: top-level keys the Runner, EMAHook and RNGStateHook read.
CHECKPOINT_FIELDS = ('meta', 'state_dict', 'message_hub', 'optimizer', 'param_schedulers', 'ema_state_dict',
                     'rng_states')
#: ``meta`` keys the Runner, CheckpointGuardHook and DenseProbeHook read.
BATCH_KEYS = ('world_size', 'batch_size', 'accumulative_counts', 'samples_seen')
META_FIELDS = ('epoch', 'iter', 'seed', 'dataset_meta', *BATCH_KEYS, 'dense_probe')
#: ``meta`` config source ``Runner.resume`` would run: dropped without a word.
META_DROPPED = ('config', 'cfg')
#: ``meta`` keys nothing reads on resume: dropped without a word.
META_UNREAD = ('experiment_name', 'time', 'mmengine_version')
OPTIMIZER_FIELDS = ('state', 'param_groups', 'loss_scaler', 'base_param_settings')
MESSAGE_HUB_FIELDS = ('log_scalars', 'runtime_info', 'resumed_keys')
#: ``message_hub.runtime_info`` keys CheckpointHook reads after loading (AtomicCheckpointHook writes ``last_ckpt``).
RUNTIME_INFO_FIELDS = ('best_ckpt', 'best_score', 'keep_ckpt_ids', 'last_ckpt')
RUNTIME_INFO_PREFIXES = ('best_ckpt_', 'best_score_')
#: ``runtime_info`` keys this run writes before anything reads them: dropped without a word.
RUNTIME_INFO_REWRITTEN = ('cfg', 'seed', 'experiment_name', 'mmengine_version', 'loop_stage', 'epoch', 'iter',
                          'max_epochs', 'max_iters', 'dataset_meta', 'eta')
RUNTIME_INFO_REWRITTEN_PREFIXES = ('train/', 'val/', 'test/')
#: Iteration spans of ``by_epoch=False`` schedulers, converted with the schedule.
SCHEDULER_ITER_KEYS = ('begin', 'end', 'T_max', 'total_iters', 'step_size', 'total_steps')

MAX_SEED = 2**32 - 1
#: Bounds of each batch-record entry and of a schedule conversion.
MAX_BATCH_RECORD = 2**16
MAX_CONVERSION = 1024
#: A best score (a metric, a loss) beyond this is no measurement; it would stop every later best save.
MAX_SCORE = 1e15
MAX_LOG_HISTORY = 10**6
#: Mersenne Twister words (numpy's and python's); the position is 0..624.
MT_WORDS = 624
PYTHON_RANDOM_VERSION = 3
RNG_STATE_KEYS = ('torch', 'cuda', 'numpy', 'python')
#: Param-group flags that say how the step runs, not what it computes: always this run's.
KERNEL_FLAGS = ('fused', 'foreach', 'capturable', 'differentiable')
MAX_PLAIN_DEPTH, MAX_PLAIN_ITEMS = 8, 100_000


class TrainingStateError(ValueError):
    """A training checkpoint carries state that resuming cannot act on safely."""


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
    """Whether ``tensor`` is dense (no stride 0, overlap or gap) and ends within its storage."""
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
    """None, bools, finite numbers, str, and lists/tuples/dicts of them, bounded in depth and items."""
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
