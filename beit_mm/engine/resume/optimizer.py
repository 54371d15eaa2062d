"""The weights and optimizer state a resumed run loads, checked against this run's model and optimizer."""
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping

import torch
from mmengine.optim import OptimWrapperDict
from torch import Tensor

from .fields import KERNEL_FLAGS, OPTIMIZER_FIELDS, _finite, _is_int, _is_real, _keep_only, _refuse, _show, is_dense


_WEIGHTS_FIX = ('resume with the config this checkpoint was trained with (the same model), or start a new run from '
                'its weights: --cfg-options load_from=CHECKPOINT (no --resume)')


def check_tensors(own: Mapping[str, Tensor], saved, source: str, key: str) -> None:
    """``saved`` holds exactly the keys of ``own``, each a dense, finite tensor of the same shape and kind of dtype.

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
    """One saved param group against this run's; kernel flags (:data:`KERNEL_FLAGS`) are set to this run's."""
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
    """One parameter's state: dense, finite tensors of the parameter's shape, dtype kind and strides, finite scalars."""
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
        if names is not None and set(state) != names:
            raise _refuse(source, f'{key}.state[{param_id}]', sorted(state), f'the other parameters\' state has '
                          f'{sorted(names)}', _OPTIMIZER_FIX)
        names = set(state)


def _check_numbers(source: str, key: str, value, required: tuple = (), positive: tuple = ()) -> None:
    """A dict of finite numbers, flags and tuples, with ``required`` present and ``positive`` > 0."""
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
    """Raise :class:`TrainingStateError` unless ``state_dict`` fits ``optim_wrapper``: the same param groups and
    per-parameter state, finite, of this run's shapes and kinds; kernel flags are set to this run's in place.

    Args:
        optim_wrapper: MMEngine's ``OptimWrapper``/``AmpOptimWrapper`` or an ``OptimWrapperDict``.
        state_dict: what ``optim_wrapper.state_dict()`` saved.
        source: the checkpoint's path, for messages.

    Returns:
        list[str]: the keys dropped (an empty ``loss_scaler`` resumed into an enabled one, entries nothing reads).
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
