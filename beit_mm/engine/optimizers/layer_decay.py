"""Layer-wise learning-rate decay: one optimizer param group per (layer id, weight decay).

``lr(param) = base_lr * layer_decay_rate ** (num_layers - 1 - layer_id)``, the layer id from the model's
``get_layer_depth(name) -> (layer_id, num_layers)`` (or its backbone's). Weight decay follows ``'unilm'`` (every 1-D
parameter and bias exempt, as unilm's BEiT) or ``'names'`` (``no_decay_names``, then norm layers, then biases).
"""
from typing import Callable, Dict, List, Optional, Set, Tuple

import torch
from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.utils.dl_utils.parrots_wrapper import _BatchNorm, _InstanceNorm
from torch import nn

from beit_mm.registry import OPTIM_WRAPPER_CONSTRUCTORS

NORM_LAYER_TYPES = (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)

#: ``no_decay_names`` of the ``'names'`` rule (wider than unilm's, which decays ``mask_token`` and the bias tables).
DEFAULT_NO_DECAY_NAMES: Tuple[str, ...] = ('cls_token', 'reg_token', 'mask_token', 'pos_embed',
                                           'relative_position_bias_table', 'gamma_1', 'gamma_2', 'q_bias', 'v_bias')

#: ``no_decay_names`` of the ``'unilm'`` rule (unilm's ``no_weight_decay()``).
UNILM_NO_DECAY_NAMES: Tuple[str, ...] = ('cls_token', 'pos_embed')

WEIGHT_DECAY_RULES: Tuple[str, ...] = ('names', 'unilm')

ALLOWED_PARAMWISE_KEYS: Tuple[str, ...] = ('layer_decay_rate', 'weight_decay_rule', 'no_decay_names', 'bias_decay_mult',
                                           'norm_decay_mult')

#: Parameter attribute holding its ndim before FSDP flattened it (set by ``TorchFSDPStrategy``).
ORIGINAL_NDIM_ATTR = '_beit_mm_original_ndim'

_NAMES_SHOWN = 3

LayerDepthFn = Callable[[str], Tuple[int, int]]


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Optimizer wrapper constructor with layer-wise lr decay and name/type-based weight-decay exemptions.

    ``paramwise_cfg`` keys:
        layer_decay_rate (float, required): ``d`` in ``lr = base_lr * d ** (num_layers - 1 - layer_id)``; in (0, 1].
        weight_decay_rule (str): ``'unilm'`` or ``'names'`` (default).
        no_decay_names (tuple[str]): dotted-name components that get ``weight_decay = 0``. Defaults to
            :data:`UNILM_NO_DECAY_NAMES` or :data:`DEFAULT_NO_DECAY_NAMES` by rule.
        norm_decay_mult (float): rule ``'names'``: multiplier for norm-layer parameters. Defaults to 0.
        bias_decay_mult (float): rule ``'names'``: multiplier for other ``bias`` parameters. Defaults to 0.

    Groups are sorted by layer id, decaying before exempt; frozen parameters are left out.

    Args:
        optim_wrapper_cfg: the ``optim_wrapper`` config; its ``optimizer`` must set ``lr`` and ``weight_decay``.
        paramwise_cfg: the keys above.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None) -> None:
        if not isinstance(optim_wrapper_cfg, dict) or 'optimizer' not in optim_wrapper_cfg:
            raise TypeError('LayerDecayOptimWrapperConstructor needs optim_wrapper_cfg as a dict with an `optimizer` '
                            f'key, got {optim_wrapper_cfg!r}')
        optimizer_cfg = optim_wrapper_cfg['optimizer']
        if optimizer_cfg.get('lr') is None:
            raise ValueError(f'optimizer {optimizer_cfg.get("type")!r} has no `lr`: layer-wise lr decay scales it per '
                             'group; set optim_wrapper.optimizer.lr')
        if optimizer_cfg.get('weight_decay') is None:
            raise ValueError(f'optimizer {optimizer_cfg.get("type")!r} has no `weight_decay`: this constructor sets it '
                             'per group (0 for no-decay parameters) and would otherwise mix with the optimizer\'s '
                             'own default; set optim_wrapper.optimizer.weight_decay (0.05 in the BEiT recipes)')
        paramwise_cfg = _validate_paramwise_cfg(paramwise_cfg)
        super().__init__(optim_wrapper_cfg, paramwise_cfg)
        self.layer_decay_rate: float = float(paramwise_cfg['layer_decay_rate'])
        self.weight_decay_rule: str = paramwise_cfg.get('weight_decay_rule', 'names')
        default_names = UNILM_NO_DECAY_NAMES if self.weight_decay_rule == 'unilm' else DEFAULT_NO_DECAY_NAMES
        self.no_decay_names: Tuple[str, ...] = tuple(paramwise_cfg.get('no_decay_names', default_names))
        self.bias_decay_mult: float = float(paramwise_cfg.get('bias_decay_mult', 0.0))
        self.norm_decay_mult: float = float(paramwise_cfg.get('norm_decay_mult', 0.0))

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '', **kwargs) -> None:
        """Append the layer-decay param groups of ``module`` (the whole model, ``prefix`` must be '') to ``params``."""
        if prefix:
            raise ValueError(f'LayerDecayOptimWrapperConstructor.add_params works on the whole model; got prefix '
                             f'{prefix!r}. Call it with the top-level model.')
        layer_depth = _layer_depth_fn(module)
        norm_param_ids = _norm_param_ids(module)
        if self.weight_decay_rule == 'unilm':
            _check_original_ndims(module)

        groups: Dict[Tuple[int, float], dict] = {}
        num_layers_seen: Optional[int] = None
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            layer_id, num_layers = _checked_depth(layer_depth, name)
            if num_layers_seen is None:
                num_layers_seen = num_layers
            elif num_layers != num_layers_seen:
                raise ValueError(f'get_layer_depth returned num_layers={num_layers} for {name!r} but '
                                 f'{num_layers_seen} for earlier parameters; it must return the same num_layers '
                                 '(depth + 2) for every parameter')
            weight_decay = self._weight_decay(name, param, norm_param_ids)
            key = (layer_id, weight_decay)
            if key not in groups:
                scale = self.layer_decay_rate**(num_layers - 1 - layer_id)
                kind = 'decay' if weight_decay == self.base_wd else ('no_decay' if weight_decay == 0 else
                                                                     f'wd_{weight_decay:g}')
                groups[key] = dict(
                    params=[],
                    param_names=[],
                    lr=float(self.base_lr) * scale,
                    weight_decay=weight_decay,
                    layer_id=layer_id,
                    lr_scale=scale,
                    group_name=f'layer_{layer_id}_{kind}')
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)

        ordered = [groups[key] for key in sorted(groups, key=lambda k: (k[0], -k[1]))]
        _log_table(ordered, self.layer_decay_rate)
        params.extend(ordered)

    def _weight_decay(self, name: str, param: torch.Tensor, norm_param_ids: Set[int]) -> float:
        """Weight decay of one parameter under ``self.weight_decay_rule`` (see the class docstring)."""
        components = name.split('.')
        if any(component in self.no_decay_names for component in components):
            return 0.0
        if self.weight_decay_rule == 'unilm':
            ndim = getattr(param, ORIGINAL_NDIM_ATTR, param.ndim)
            return 0.0 if ndim == 1 or components[-1] == 'bias' else float(self.base_wd)
        if id(param) in norm_param_ids:
            return float(self.base_wd) * self.norm_decay_mult
        if components[-1] == 'bias':
            return float(self.base_wd) * self.bias_decay_mult
        return float(self.base_wd)


def _validate_paramwise_cfg(paramwise_cfg: Optional[dict]) -> dict:
    """Check keys and values of ``paramwise_cfg``; returns a shallow copy."""
    if paramwise_cfg is not None and not isinstance(paramwise_cfg, dict):
        raise TypeError(f'paramwise_cfg must be a dict, got {type(paramwise_cfg).__name__}')
    paramwise_cfg = {} if paramwise_cfg is None else paramwise_cfg
    unknown = sorted(set(paramwise_cfg) - set(ALLOWED_PARAMWISE_KEYS))
    if unknown:
        raise ValueError(f'LayerDecayOptimWrapperConstructor got unknown paramwise_cfg keys {unknown}; allowed keys: '
                         f'{list(ALLOWED_PARAMWISE_KEYS)}')
    if 'layer_decay_rate' not in paramwise_cfg:
        raise ValueError('LayerDecayOptimWrapperConstructor needs paramwise_cfg=dict(layer_decay_rate=...) (e.g. 0.65 '
                         'for BEiT-B on ADE20K, 0.9 for ImageNet fine-tuning); use DefaultOptimWrapperConstructor for '
                         'no layer decay')
    rule = paramwise_cfg.get('weight_decay_rule', 'names')
    if rule not in WEIGHT_DECAY_RULES:
        raise ValueError(f'weight_decay_rule must be one of {list(WEIGHT_DECAY_RULES)}, got {rule!r}')
    mults = sorted({'bias_decay_mult', 'norm_decay_mult'} & set(paramwise_cfg))
    if rule == 'unilm' and mults:
        raise ValueError(f"weight_decay_rule='unilm' exempts every 1-D parameter and bias (unilm's rule) and takes no "
                         f"{mults}; remove them, or use weight_decay_rule='names' for per-type multipliers")
    rate = paramwise_cfg['layer_decay_rate']
    if not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise ValueError(f'layer_decay_rate must be a number in (0, 1], got {rate!r}')
    names = paramwise_cfg.get('no_decay_names', DEFAULT_NO_DECAY_NAMES)
    if isinstance(names, str) or not all(isinstance(n, str) and n and '.' not in n for n in names):
        raise ValueError('no_decay_names must be a tuple of name components without dots (e.g. '
                         f"('cls_token', 'pos_embed')), got {names!r}")
    for key in ('bias_decay_mult', 'norm_decay_mult'):
        value = paramwise_cfg.get(key, 0.0)
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f'{key} must be a non-negative number, got {value!r}')
    return dict(paramwise_cfg)


def _layer_depth_fn(model: nn.Module) -> LayerDepthFn:
    """``name -> (layer_id, num_layers)`` from the model's ``get_layer_depth`` or its backbone's."""
    model_fn = getattr(model, 'get_layer_depth', None)
    if callable(model_fn):

        def depth(name: str) -> Tuple[int, int]:
            try:
                return model_fn(name)
            except NotImplementedError as err:  # mmpretrain's ImageClassifier when its backbone lacks the method
                raise TypeError(f'{type(model).__name__}.get_layer_depth cannot answer ({err}): its backbone must '
                                'implement get_layer_depth(param_name, prefix) -> (layer_id, num_layers) for '
                                'LayerDecayOptimWrapperConstructor') from err

        return depth

    backbone = getattr(model, 'backbone', None)
    backbone_fn = getattr(backbone, 'get_layer_depth', None)
    if not callable(backbone_fn):
        what = 'has no `backbone`' if backbone is None else f'its backbone {type(backbone).__name__} has none'
        raise TypeError(f'LayerDecayOptimWrapperConstructor cannot assign layer ids for {type(model).__name__}: the '
                        f'model has no get_layer_depth and {what}. The backbone must implement get_layer_depth('
                        'param_name, prefix) -> (layer_id, num_layers) (num_layers = depth + 2), or use '
                        'DefaultOptimWrapperConstructor without layer decay')
    prefix = 'backbone.'
    backbone_names = [name for name, _ in backbone.named_parameters()]
    if not backbone_names:
        raise TypeError(f'backbone {type(backbone).__name__} of {type(model).__name__} has no parameters; layer decay '
                        'needs a backbone to decay')
    _, num_layers = _checked_depth(lambda n: backbone_fn(n, prefix=prefix), prefix + backbone_names[0])

    def depth(name: str) -> Tuple[int, int]:
        if name.startswith(prefix):
            return backbone_fn(name, prefix=prefix)
        return num_layers - 1, num_layers

    return depth


def _checked_depth(layer_depth: LayerDepthFn, name: str) -> Tuple[int, int]:
    """Call ``layer_depth(name)`` and check it returns ints with ``0 <= layer_id < num_layers``."""
    result = layer_depth(name)
    if not isinstance(result, (tuple, list)) or len(result) != 2 or not all(isinstance(v, int) for v in result):
        raise TypeError(f'get_layer_depth({name!r}) must return (layer_id, num_layers) as two ints, got {result!r}')
    layer_id, num_layers = int(result[0]), int(result[1])
    if not 0 <= layer_id < num_layers:
        raise ValueError(f'get_layer_depth({name!r}) returned layer_id={layer_id} outside '
                         f'[0, num_layers={num_layers}); num_layers must be depth + 2 with the last id for modules '
                         'after the backbone')
    return layer_id, num_layers


def _check_original_ndims(model: nn.Module) -> None:
    """Raise if ``model`` holds FSDP-flattened parameters without their original ndim recorded.

    Flattened parameters are all 1-D, so the ``'unilm'`` rule would exempt every weight from decay.
    """
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # torch built without distributed support: no FSDP either
        return
    if not any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        return
    missing = [name for name, param in model.named_parameters() if not hasattr(param, ORIGINAL_NDIM_ATTR)]
    if missing:
        raise ValueError(f"weight_decay_rule='unilm' exempts 1-D parameters, but the model is FSDP-wrapped and its "
                         f'parameters are flattened 1-D views (e.g. {missing[0]!r}), so every weight would lose its '
                         "weight decay. Train with strategy=dict(type='TorchFSDPStrategy', ...) from "
                         "beit_mm.engine.fsdp, which records each parameter's original ndim before wrapping")


def _norm_param_ids(model: nn.Module) -> Set[int]:
    """``id()`` of every parameter owned directly by a norm layer of ``model``."""
    return {
        id(param)
        for module in model.modules() if isinstance(module, NORM_LAYER_TYPES)
        for param in module.parameters(recurse=False)
    }


def _log_table(groups: List[dict], layer_decay_rate: float) -> None:
    """Log one row per param group: layer id, lr scale, lr, weight decay, tensors/elements, first names."""
    rows = [('group', 'layer', 'scale', 'lr', 'weight_decay', 'tensors', 'numel', 'names')]
    for group in groups:
        names = group['param_names']
        shown = ', '.join(names[:_NAMES_SHOWN]) + (f', ... (+{len(names) - _NAMES_SHOWN})'
                                                    if len(names) > _NAMES_SHOWN else '')
        rows.append((group['group_name'], str(group['layer_id']), f'{group["lr_scale"]:.4g}', f'{group["lr"]:.4g}',
                     f'{group["weight_decay"]:.4g}', str(len(names)), str(sum(p.numel() for p in group['params'])),
                     shown))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ['  '.join(cell.ljust(width) for cell, width in zip(row[:-1], widths)) + '  ' + row[-1] for row in rows]
    num_tensors = sum(len(group['params']) for group in groups)
    MMLogger.get_current_instance().info(
        f'LayerDecayOptimWrapperConstructor: layer_decay_rate={layer_decay_rate}, {len(groups)} param groups, '
        f'{num_tensors} parameter tensors\n' + '\n'.join(lines))
