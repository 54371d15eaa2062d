"""EoMT's optimizer parameter groups: the official layer-wise lr decay (tue-mps/eomt@7bd19dd), for beit_mm's EoMT.

A backbone parameter in block ``b`` of ``L`` gets ``lr * llrd ** (L - 1 - b)``; one registered before the blocks
(tokens, patch embedding, shared relative position bias) gets block 0's factor; the final norm, the last ``L2`` blocks
when ``llrd_l2_enabled`` is False and everything outside the backbone get the full lr. Every group keeps the
optimizer's weight decay. Block membership comes from the backbone's ``get_layer_depth``.
"""
from typing import Dict, List, Tuple

from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from beit_mm.engine.schedulers.two_stage_warmup_poly import BACKBONE_GROUP_KEY
from beit_mm.registry import OPTIM_WRAPPER_CONSTRUCTORS

ALLOWED_PARAMWISE_KEYS: Tuple[str, ...] = ('layer_decay_rate', 'llrd_l2_enabled')

_BACKBONE_PREFIX = 'backbone.'


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class EoMTLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Param groups of a ``beit_mm.EoMT`` with the official EoMT layer-wise lr decay.

    ``paramwise_cfg`` keys:
        layer_decay_rate (float, required): the official ``llrd``, in (0, 1].
        llrd_l2_enabled (bool): decay the last ``L2`` blocks too (default True).

    One group per (lr scale, backbone or not), tagged with
    :data:`~beit_mm.engine.schedulers.two_stage_warmup_poly.BACKBONE_GROUP_KEY`; the non-backbone group comes first, so
    the logged lr is the full lr's. Frozen parameters are left out.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None) -> None:
        if not isinstance(optim_wrapper_cfg, dict) or 'optimizer' not in optim_wrapper_cfg:
            raise TypeError('EoMTLayerDecayOptimWrapperConstructor needs optim_wrapper_cfg as a dict with an '
                            f'`optimizer` key, got {optim_wrapper_cfg!r}')
        optimizer_cfg = optim_wrapper_cfg['optimizer']
        for key in ('lr', 'weight_decay'):
            if optimizer_cfg.get(key) is None:
                raise ValueError(f'optimizer {optimizer_cfg.get("type")!r} has no `{key}`: set '
                                 f'optim_wrapper.optimizer.{key} (EoMT: lr=1e-4, weight_decay=0.05, '
                                 'training/mask_classification_semantic.py:25,29)')
        paramwise_cfg = dict(paramwise_cfg or {})
        unknown = sorted(set(paramwise_cfg) - set(ALLOWED_PARAMWISE_KEYS))
        if unknown:
            hint = (" (official lr_mult != 1 acts as llrd_l2_enabled=False; see this module's docstring)"
                    if 'lr_mult' in unknown else '')
            raise ValueError(f'EoMTLayerDecayOptimWrapperConstructor got unknown paramwise_cfg keys {unknown}; '
                             f'allowed: {list(ALLOWED_PARAMWISE_KEYS)}{hint}')
        rate = paramwise_cfg.get('layer_decay_rate')
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 < rate <= 1:
            raise ValueError('EoMTLayerDecayOptimWrapperConstructor needs paramwise_cfg=dict(layer_decay_rate=...) '
                             f'in (0, 1] (the official llrd, 0.8 by default), got {rate!r}')
        l2_enabled = paramwise_cfg.get('llrd_l2_enabled', True)
        if not isinstance(l2_enabled, bool):
            raise ValueError(f'llrd_l2_enabled must be True or False, got {l2_enabled!r}')
        super().__init__(optim_wrapper_cfg, paramwise_cfg)
        self.layer_decay_rate = float(rate)
        self.llrd_l2_enabled = l2_enabled

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '', **kwargs) -> None:
        """Append the param groups of ``module`` (a whole ``beit_mm.EoMT``) to ``params``; called once by
        ``DefaultOptimWrapperConstructor.__call__``."""
        if prefix:
            raise ValueError(f'EoMTLayerDecayOptimWrapperConstructor works on the whole model; got prefix {prefix!r}')
        scales = self.lr_scales(module)
        groups: Dict[Tuple[float, bool], dict] = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            is_backbone = name.startswith(_BACKBONE_PREFIX)
            key = (scales[name], is_backbone)
            if key not in groups:
                groups[key] = {
                    'params': [],
                    'param_names': [],
                    'lr': float(self.base_lr) * scales[name],
                    'weight_decay': float(self.base_wd),
                    'lr_scale': scales[name],
                    BACKBONE_GROUP_KEY: is_backbone,
                    'group_name': f'{"backbone" if is_backbone else "eomt"}_scale_{scales[name]:.4g}',
                }
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)
        ordered = [groups[key] for key in sorted(groups, key=lambda k: (k[1], -k[0]))]
        _log_groups(ordered, self.layer_decay_rate, self.llrd_l2_enabled)
        params.extend(ordered)

    def lr_scales(self, model: nn.Module) -> Dict[str, float]:
        """``name -> lr / base lr`` for every parameter of ``model`` by the official rule (module docstring)."""
        backbone = getattr(model, 'backbone', None)
        num_l2 = getattr(model, 'num_blocks', None)
        if backbone is None or num_l2 is None or not callable(getattr(backbone, 'get_layer_depth', None)):
            raise TypeError(f'EoMTLayerDecayOptimWrapperConstructor needs a beit_mm.EoMT (a `backbone` answering '
                            f'get_layer_depth and `num_blocks`), got {type(model).__name__}; use '
                            'beit_mm.LayerDecayOptimWrapperConstructor for other segmentors')
        depth = backbone.num_layers
        l2_blocks = set(range(depth - num_l2, depth))
        norm = getattr(backbone, 'norm', None)
        norm_params = {id(p) for p in norm.parameters()} if norm is not None else set()
        decay = self.layer_decay_rate
        scales = {}
        # reverse registration order, block index starting at L
        named = list(model.named_parameters())
        block_i = depth
        for name, param in reversed(named):
            if not name.startswith(_BACKBONE_PREFIX):
                scales[name] = 1.0
                continue
            layer_id, _ = backbone.get_layer_depth(name, prefix=_BACKBONE_PREFIX)
            is_block = 1 <= layer_id <= depth
            if is_block:
                block_i = layer_id - 1
            scale = 1.0
            if is_block or block_i == 0:
                scale = decay**(depth - 1 - block_i)
            if id(param) in norm_params:
                scale = 1.0
            if is_block and block_i in l2_blocks and not self.llrd_l2_enabled:
                scale = 1.0
            scales[name] = scale
        return scales


def _log_groups(groups: List[dict], decay: float, l2_enabled: bool) -> None:
    """One line per param group: name, lr scale, lr, weight decay, tensor count, first names."""
    lines = []
    for g in groups:
        names = g['param_names']
        shown = ', '.join(names[:3]) + (f', ... (+{len(names) - 3})' if len(names) > 3 else '')
        lines.append(f'{g["group_name"]:<24} lr {g["lr"]:.4g}  wd {g["weight_decay"]:.4g}  {len(names)} tensors: '
                     f'{shown}')
    MMLogger.get_current_instance().info(
        f'EoMTLayerDecayOptimWrapperConstructor: llrd={decay}, llrd_l2_enabled={l2_enabled}, {len(groups)} param '
        'groups\n' + '\n'.join(lines))
