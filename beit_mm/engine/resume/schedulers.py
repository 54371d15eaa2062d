"""The parameter schedulers a resumed run continues: as many as this run's, every setting this run's, the counters
within the schedule."""
from __future__ import annotations

import numbers

from mmengine.optim.scheduler.param_scheduler import INF as SCHEDULER_INF

from .fields import SCHEDULER_ITER_KEYS, _bounded_int, _is_real, _keep_only, _refuse


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
