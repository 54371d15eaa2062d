"""``torch.compile`` of a model's compute, whole (``fullgraph=True``) or block by block: the config's ``compile``.

A model's ``compile_units()`` names its pure tensor compute; any other model is compiled whole, or with
``scope='blocks'`` each of its ``fsdp_wrap_units``. MMEngine's own would compile ``train_step`` into many graphs.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.model import is_model_wrapper
from torch import nn

COMPILE_SCOPES = ('model', 'blocks')
DEFAULT_DEVICES = ('cuda', )
# a graph break or a shape-generic graph is a defect to show
COMPILE_DEFAULTS = dict(fullgraph=True, dynamic=False)


def compile_units(model: nn.Module, scope: str = 'model') -> list:
    """What :func:`compile_model` compiles: ``model.compile_units()`` or the model (``'model'``), or its blocks."""
    if scope not in COMPILE_SCOPES:
        raise ValueError(f'compile scope={scope!r} is not one of {COMPILE_SCOPES}')
    if scope == 'model':
        declared = getattr(model, 'compile_units', None)
        return list(declared()) if callable(declared) else [model]
    unit_types = tuple({t for m in model.modules() for t in getattr(m, 'fsdp_wrap_units', ())})
    blocks = [m for m in model.modules() if unit_types and isinstance(m, unit_types)]
    if not blocks:
        raise ValueError(f"compile scope='blocks' found no transformer blocks in {type(model).__name__} (no module "
                         "declares fsdp_wrap_units); use scope='model'")
    return blocks


def compile_model(model: nn.Module, scope: str = 'model', **options) -> list:
    """Compile ``model``'s units in place and return them; ``options`` go to ``torch.compile``."""
    model = model.module if is_model_wrapper(model) else model
    options = {**COMPILE_DEFAULTS, **options}
    for module in model.modules():
        if callable(getattr(module, 'refresh_host_state', None)):
            module.refresh_host_state()
    units = compile_units(model, scope)
    for unit in units:
        if isinstance(unit, nn.Module):
            unit.compile(**options)
        else:
            setattr(unit.__self__, unit.__name__, torch.compile(unit, **options))
    return units


def compile_settings(setting: bool | dict | None) -> dict | None:
    """The config's ``compile`` value -> ``dict(scope, devices, **torch.compile options)``, or None when off."""
    if not setting:
        return None
    settings = dict(setting) if isinstance(setting, dict) else {}
    scope = settings.setdefault('scope', 'model')
    if scope not in COMPILE_SCOPES:
        raise ValueError(f'compile=dict(scope={scope!r}) is not one of {COMPILE_SCOPES}')
    devices = settings.setdefault('devices', DEFAULT_DEVICES)
    if isinstance(devices, str) or not isinstance(devices, Sequence):
        raise ValueError(f"compile=dict(devices={devices!r}) must be a list of device types, e.g. ['cuda']")
    settings['devices'] = tuple(devices)
    return settings
