"""``torch.compile`` of a model's compute, whole (``fullgraph=True``) or block by block: the ``compile`` setting of the
configs and ``tools/train.py --compile``.

What is compiled is asked of the model (STYLE rule 13): a model with ``compile_units()`` names the modules whose
calls are pure tensor compute (EoMT: its prediction network; the Hungarian matching of its loss stays eager, as in
the official EoMT, whose ``main.py:154-155`` compiles the LightningModule, i.e. its ``forward``, the network, while
the loss runs in ``training_step``); any other model (``BEiTPretrain``, VQ-KD,
mmseg's ``EncoderDecoder``, mmpretrain's classifiers) is compiled whole: its ``forward`` in every mode, the loss
included. ``scope='blocks'`` compiles each transformer block (the modules in the model's ``fsdp_wrap_units``)
instead: one graph, shared by the blocks of one shape, for models whose remaining parts break graphs.

The config key is MMEngine's ``compile`` (OpenMMLab users know it), read here instead of by MMEngine: MMEngine 0.10.7
compiles ``train_step``, whose optimizer step and data preprocessing split it into many graphs. A dict holds
``torch.compile``'s options plus ``scope`` and ``devices``, the device types on which it applies (default
``('cuda',)``: on CPU the code generation costs minutes of a short run).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.model import is_model_wrapper
from torch import nn

COMPILE_SCOPES = ('model', 'blocks')
DEFAULT_DEVICES = ('cuda', )
# torch.compile options unless the setting gives them: a graph break or a shape-generic graph is a defect to show
COMPILE_DEFAULTS = dict(fullgraph=True, dynamic=False)


def compile_units(model: nn.Module, scope: str = 'model') -> list:
    """What :func:`compile_model` compiles: ``model.compile_units()`` (modules or bound methods) or the model itself
    (``'model'``), or every module of a type in some submodule's ``fsdp_wrap_units`` (``'blocks'``)."""
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
    """Compile ``model`` in place (``nn.Module.compile``: the module's ``__call__`` runs the compiled code, state dict
    and parameters unchanged) and return the compiled modules. Modules with ``refresh_host_state()`` (the VQ-KD
    codebook's ``initted``) read their buffers' values into Python first. ``options`` go to ``torch.compile``
    (``fullgraph=True`` and ``dynamic=False`` unless given: a graph break or a shape-generic graph is a defect the run
    should show, not hide)."""
    model = model.module if is_model_wrapper(model) else model
    options = {**COMPILE_DEFAULTS, **options}
    for module in model.modules():  # host copies of buffer values that compiled code branches on
        if callable(getattr(module, 'refresh_host_state', None)):
            module.refresh_host_state()
    units = compile_units(model, scope)
    for unit in units:
        if isinstance(unit, nn.Module):
            unit.compile(**options)
        else:  # a bound method the model declared: the instance's attribute now runs the compiled function
            setattr(unit.__self__, unit.__name__, torch.compile(unit, **options))
    return units


def compile_settings(setting: bool | dict | None) -> dict | None:
    """The config's ``compile`` value -> ``dict(scope, devices, **torch.compile options)``, or None when off.
    ``True`` means the defaults; a dict may set any of them."""
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
