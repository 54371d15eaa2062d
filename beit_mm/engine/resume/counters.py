"""The counters a resumed run continues from, and the batch record that converts them when the batch differs."""
from __future__ import annotations

import math
from collections.abc import Mapping

from mmengine.optim.scheduler.param_scheduler import INF as SCHEDULER_INF

from .fields import (BATCH_KEYS, MAX_BATCH_RECORD, MAX_CONVERSION, MAX_SEED, SCHEDULER_ITER_KEYS, TrainingStateError,
                     _bounded_int, _is_int, _refuse)


def check_counters(meta: Mapping, source: str, max_iters: int, max_epochs: int) -> None:
    """Raise ``TrainingStateError`` unless ``meta.iter``/``meta.epoch`` are ints in [0, max_iters]/[0, max_epochs]."""
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


def batch_record(world_size: int, batch_size: int, accumulative_counts: int, samples_seen: int) -> dict:
    """What a checkpoint's ``meta`` records about the batch (:data:`BATCH_KEYS`)."""
    return dict(world_size=int(world_size), batch_size=int(batch_size), accumulative_counts=int(accumulative_counts),
                samples_seen=int(samples_seen))


def check_batch_record(meta: Mapping, source: str) -> bool:
    """Whether ``meta`` has the batch record; raise ``TrainingStateError`` for a partial or out-of-bounds one."""
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
    """Compare the batch a checkpoint was trained with to this run's.

    Returns:
        None for the same images per iteration, else ``ratio`` = images per iteration then / now.

    Raises:
        TrainingStateError: another global batch without ``schedule_in_samples``, or a ratio beyond
            :data:`MAX_CONVERSION`.
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
    """Multiply ``meta.iter`` and the iteration-based schedulers' counts by ``ratio`` in place; returns the new iter."""
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
                if key == 'total_iters' and _is_int(state.get(key)):  # end - begin - 1
                    state[key] = scale(state[key] + 1) - 1
                elif _is_int(state.get(key)) and state[key] >= 0:
                    state[key] = scale(state[key])
    return meta['iter']


def batch_now(runner) -> tuple[int, int, int]:
    """(processes, images per process per iteration, iterations per optimizer update) of this run."""
    from mmengine.dist import get_world_size
    wrapper = runner.optim_wrapper
    counts = wrapper.get('accumulative_counts', 1) if isinstance(wrapper, dict) else \
        getattr(wrapper, '_accumulative_counts', 1)
    return get_world_size(), int(runner.train_dataloader.batch_size), int(counts)
