"""EoMT's optimizer parameter groups: the official layer-wise lr decay, restated for beit_mm's ``EoMT`` on a BEiT.

The official rule (github.com/tue-mps/eomt at ``7bd19dd``, ``training/lightning_module.py:102-152``, ``configure_
optimizers``) walks the parameters in reverse registration order, remembering the block index of the last block
parameter it saw (starting at ``L``, the number of blocks), and gives each backbone parameter

- in block ``b``: ``lr * llrd ** (L - 1 - b)`` (lines 122-128), so the last block trains at the full lr;
- outside the blocks: ``lr * llrd ** (L - 1)``, block 0's factor, when the block remembered is 0, i.e. when the next
  block parameter after it in registration order is in block 0 (lines 127-128); otherwise the full lr;
- in the final norm (``"backbone.norm" in name``): the full lr (lines 133-134; registered after the blocks in
  timm's ViT and in beit_mm's BEiT, it has the full lr by the previous rule already);
- in one of the last ``L2`` blocks (the ones that see the queries): the full lr when ``llrd_l2_enabled`` is False
  or ``lr_mult != 1`` (lines 136-141);

every other parameter (queries, class/mask heads, upscale) gets the full lr (lines 146-149), and every parameter the
optimizer's weight decay, 0.05 by default: ``AdamW(param_groups, weight_decay=...)`` with no per-group value (line
152), so norms, biases, tokens and position tables decay too.

In beit_mm's BEiT the tokens (``cls_token``, ``mask_token``, ``pos_embed``), ``patch_embed.*`` and a shared relative
position bias ``rel_pos_bias.*`` are registered before ``blocks``: they take block 0's factor, as DINOv2's tokens,
position embedding and patch embedding do in the official code. The final ``norm`` comes after the blocks (full lr),
and so do BEiT v2's pretraining-only ``cls_pt_layers`` (full lr; they are not in EoMT's forward). Per-block relative
position bias tables are block parameters. Which parameters belong to which block is asked of the backbone
(``get_layer_depth``: block ``b`` is layer id ``b + 1``), and the final norm is ``backbone.norm`` by identity, not by
name matching.

``lr_mult`` is not taken: in the official code it never multiplies anything (the ``elif`` at line 130 repeats the
condition of the ``if`` at line 127, so it is unreachable); its only effect is the L2 exception at line 139, which
``llrd_l2_enabled=False`` gives here (the DINOv3 configs' ``lr_mult: 0.1`` comes to that).
"""
from typing import Dict, List, Tuple

from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from beit_mm.engine.schedulers.two_stage_warmup_poly import BACKBONE_GROUP_KEY
from beit_mm.registry import OPTIM_WRAPPER_CONSTRUCTORS

#: ``paramwise_cfg`` keys this constructor understands; anything else is a ValueError.
ALLOWED_PARAMWISE_KEYS: Tuple[str, ...] = ('layer_decay_rate', 'llrd_l2_enabled')

_BACKBONE_PREFIX = 'backbone.'


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class EoMTLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Param groups of a ``beit_mm.EoMT`` with the official EoMT layer-wise lr decay (see the module docstring).

    Config (the official semantic-segmentation defaults, ``training/mask_classification_semantic.py:25-29``)::

        optim_wrapper = dict(
            type='OptimWrapper',
            optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
            constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(layer_decay_rate=0.8, llrd_l2_enabled=True))
        param_scheduler = [dict(type='beit_mm.TwoStageWarmupPolyLR', ...)]  # reads the groups' backbone tag

    ``paramwise_cfg`` keys:
        layer_decay_rate (float, required): the official ``llrd``, in (0, 1].
        llrd_l2_enabled (bool): decay the last ``L2`` blocks too (official default True); False gives them the full
            lr.

    Param groups: one per (lr scale, backbone or not) with keys ``params``, ``param_names``, ``lr``,
    ``weight_decay`` (the optimizer's, for every group), ``lr_scale``, ``group_name`` and
    :data:`~beit_mm.engine.schedulers.two_stage_warmup_poly.BACKBONE_GROUP_KEY` (True for ``backbone.*``
    parameters, the final norm's included, as the official scheduler's backbone groups,
    ``lightning_module.py:143-156``). The non-backbone group comes first, so the lr MMEngine logs (the first
    group's) is the full lr's schedule; then the backbone groups from the largest scale down. Parameters with
    ``requires_grad=False`` are left out.
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
        # official lightning_module.py:108-109,115: reverse registration order, block index starting at L
        named = list(model.named_parameters())
        block_i = depth
        for name, param in reversed(named):
            if not name.startswith(_BACKBONE_PREFIX):
                scales[name] = 1.0  # lines 146-149
                continue
            layer_id, _ = backbone.get_layer_depth(name, prefix=_BACKBONE_PREFIX)
            is_block = 1 <= layer_id <= depth
            if is_block:
                block_i = layer_id - 1
            scale = 1.0
            if is_block or block_i == 0:  # lines 127-128
                scale = decay**(depth - 1 - block_i)
            if id(param) in norm_params:  # lines 133-134
                scale = 1.0
            if is_block and block_i in l2_blocks and not self.llrd_l2_enabled:  # lines 136-141
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
