"""Layer-wise learning-rate decay: one optimizer param group per (layer id, weight decay).

The layer id is asked of the model (``get_layer_depth(name) -> (layer_id, num_layers)``, ``num_layers = depth + 2``:
0 the stem, block ``i`` is ``i + 1``, everything after the backbone ``num_layers - 1``; the backbone's when the top
model has none, as mmseg's ``EncoderDecoder``)::

    lr(param) = base_lr * layer_decay_rate ** (num_layers - 1 - layer_id)

Two weight-decay rules (``paramwise_cfg.weight_decay_rule``), so a config states which reference it follows:

- ``'unilm'``: unilm ``beit/optim_factory.py::get_parameter_groups`` (line 65) and its segmentation constructor
  (line 43): every 1-D parameter and ``*.bias`` exempt, plus ``no_decay_names`` (default
  :data:`UNILM_NO_DECAY_NAMES`). unilm's segmentation constructor compares prefixed names, which never match, so
  segmentation recipes reproduce it with ``no_decay_names=()``.
- ``'names'`` (default): ``no_decay_names`` (matched against the dotted components of the full name; default
  :data:`DEFAULT_NO_DECAY_NAMES`), then norm layers by module type (``norm_decay_mult``), then ``bias``
  (``bias_decay_mult``); any other parameter decays.
"""
from typing import Callable, Dict, List, Optional, Set, Tuple

import torch
from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.utils.dl_utils.parrots_wrapper import _BatchNorm, _InstanceNorm
from torch import nn

from beit_mm.registry import OPTIM_WRAPPER_CONSTRUCTORS

#: Norm layers whose parameters (weight and bias) get ``weight_decay * norm_decay_mult``; detected by module type.
NORM_LAYER_TYPES = (_BatchNorm, _InstanceNorm, nn.GroupNorm, nn.LayerNorm)

#: Default ``no_decay_names`` of the ``'names'`` rule: the ViT/BEiT tokens, position embeddings, shared/per-block
#: relative position bias, layer-scale and the q/v biases of BEiT's attention. This is beit_mm's own choice, wider than
#: unilm's (which decays the relative position tables and ``mask_token``; use ``weight_decay_rule='unilm'`` for it).
DEFAULT_NO_DECAY_NAMES: Tuple[str, ...] = ('cls_token', 'reg_token', 'mask_token', 'pos_embed',
                                           'relative_position_bias_table', 'gamma_1', 'gamma_2', 'q_bias', 'v_bias')

#: ``no_decay_names`` of the ``'unilm'`` rule: unilm ``beit/modeling_finetune.py`` and ``beit/modeling_pretrain.py``
#: ``no_weight_decay() -> {'pos_embed', 'cls_token'}``.
UNILM_NO_DECAY_NAMES: Tuple[str, ...] = ('cls_token', 'pos_embed')

#: Values of ``paramwise_cfg.weight_decay_rule``.
WEIGHT_DECAY_RULES: Tuple[str, ...] = ('names', 'unilm')

#: ``paramwise_cfg`` keys this constructor understands; anything else is a ValueError (no silently ignored options).
ALLOWED_PARAMWISE_KEYS: Tuple[str, ...] = ('layer_decay_rate', 'weight_decay_rule', 'no_decay_names', 'bias_decay_mult',
                                           'norm_decay_mult')

#: Attribute holding a parameter's number of dimensions before FSDP flattened it (set by
#: ``beit_mm.engine.fsdp.TorchFSDPStrategy.build_model``); the ``'unilm'`` rule reads it when present.
ORIGINAL_NDIM_ATTR = '_beit_mm_original_ndim'

#: How many parameter names of a group the logged table shows.
_NAMES_SHOWN = 3

LayerDepthFn = Callable[[str], Tuple[int, int]]


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Optimizer wrapper constructor with layer-wise lr decay and name/type-based weight-decay exemptions.

    Config::

        optim_wrapper = dict(
            type='OptimWrapper',  # or 'AmpOptimWrapper'
            optimizer=dict(type='AdamW', lr=3e-5, betas=(0.9, 0.999), weight_decay=0.05),
            constructor='beit_mm.LayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(layer_decay_rate=0.9,
                               weight_decay_rule='unilm',  # unilm's 1-D / bias / no_weight_decay() rule
                               no_decay_names=()))  # () = unilm's segmentation constructor

    ``paramwise_cfg`` keys:
        layer_decay_rate (float, required): ``d`` in ``lr = base_lr * d ** (num_layers - 1 - layer_id)``; in (0, 1].
        weight_decay_rule (str): ``'unilm'`` or ``'names'`` (default), see the module docstring.
        no_decay_names (tuple[str]): a parameter whose dotted name has one of these as a *component* gets
            ``weight_decay = 0`` (``blocks.0.attn.q_bias`` matches ``'q_bias'``; ``my_cls_token_proj.weight`` does not
            match ``'cls_token'``). Defaults to :data:`UNILM_NO_DECAY_NAMES` (rule ``'unilm'``) or
            :data:`DEFAULT_NO_DECAY_NAMES` (rule ``'names'``).
        norm_decay_mult (float): rule ``'names'`` only: weight decay multiplier for the weight and bias of norm layers
            (``_BatchNorm``, ``_InstanceNorm``, ``GroupNorm``, ``LayerNorm``, detected by module type). Defaults to 0.
        bias_decay_mult (float): rule ``'names'`` only: weight decay multiplier for other parameters named ``bias``.
            Defaults to 0.

    Rule ``'unilm'``: ``weight_decay = 0`` for 1-D parameters, ``*.bias`` and ``no_decay_names``; the optimizer's
    ``weight_decay`` otherwise. Rule ``'names'``: ``no_decay_names`` -> norm layer -> ``bias`` -> ``weight_decay``; any
    other parameter (also a 1-D one) gets the optimizer's ``weight_decay``. Parameters with ``requires_grad=False`` are
    left out of the optimizer.

    Layer ids: if the model (after unwrapping DDP's ``.module``) has ``get_layer_depth``, it is called with the full
    parameter name (mmpretrain classifiers, bare backbones). Otherwise ``model.backbone.get_layer_depth(name,
    prefix='backbone.')`` gives the ids of ``backbone.*`` parameters and every other parameter (neck, decode_head,
    auxiliary_head, head) gets ``num_layers - 1`` (lr scale 1) (mmseg segmentors, mmpretrain classifiers).

    Param groups: one per (layer id, weight decay) with keys ``params``, ``param_names`` (torch's named-param-group key,
    also used for logging), ``lr``, ``weight_decay``, ``layer_id``, ``lr_scale`` and ``group_name``; sorted by layer id,
    then decaying before exempt. MMEngine's schedulers keep the per-group lr ratios: they record each group's
    ``initial_lr`` and multiply (LinearLR, MultiStepLR, ...) or anneal to an ``eta_min`` (PolyLR, CosineAnnealingLR),
    which keeps the ratios only when ``eta_min == 0`` (use ``eta_min_ratio`` on CosineAnnealingLR otherwise).

    Args:
        optim_wrapper_cfg: the ``optim_wrapper`` config without ``constructor`` and ``paramwise_cfg``; its
            ``optimizer`` must set ``lr`` and ``weight_decay``.
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
        """Append the layer-decay param groups of ``module`` (the whole model) to ``params``.

        Called once by ``DefaultOptimWrapperConstructor.__call__`` with the unwrapped model; unlike the parent it does
        not recurse, it groups all parameters at once.

        Args:
            params: list of param groups, extended in place.
            module: the model (segmentor, classifier, or a module answering ``get_layer_depth`` itself).
            prefix: must be ''; the constructor works on whole models only.
        """
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
    """``name -> (layer_id, num_layers)`` for every parameter name of ``model``.

    The model's own ``get_layer_depth(name)`` if it has one, else ``model.backbone.get_layer_depth(name, prefix)`` for
    ``backbone.*`` names with ``num_layers - 1`` for everything else.
    """
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

    Under FSDP (``use_orig_params=True``) every parameter the optimizer sees is a 1-D view into a flat shard, so unilm's
    ``len(param.shape) == 1`` test would exempt every weight from weight decay (and merge the decay/no-decay groups).
    ``TorchFSDPStrategy`` records the original ndim (:data:`ORIGINAL_NDIM_ATTR`) before wrapping.
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
