"""DINOv3 ViT checkpoints -> beit_mm ``DINOv3``: the official ``.pth``, HF ``DINOv3ViTModel`` and HF EoMT-DINOv3.

Names (block ``i``)::

    official (dinov3 @ 6876159)       HF DINOv3ViTModel (4.57)                   beit_mm DINOv3
    cls_token                         embeddings.cls_token                       cls_token
    storage_tokens                    embeddings.register_tokens                 reg_token
    patch_embed.proj.*                embeddings.patch_embeddings.*              patch_embed.proj.*
    blocks.i.attn.qkv.weight          layer.i.attention.{q,k,v}_proj.weight      blocks.i.attn.qkv.weight (q|k|v rows)
    blocks.i.attn.qkv.bias            layer.i.attention.{q,v}_proj.bias          blocks.i.attn.q_bias / v_bias
    blocks.i.attn.proj.*              layer.i.attention.o_proj.*                 blocks.i.attn.proj.*
    blocks.i.ls{1,2}.gamma            layer.i.layer_scale{1,2}.lambda1           blocks.i.gamma_{1,2}
    blocks.i.mlp.fc1/fc2.*            layer.i.mlp.up_proj/down_proj.*            blocks.i.mlp.fc1/fc2.*
    blocks.i.mlp.w1/w2/w3.* (SwiGLU)  layer.i.mlp.gate_proj/up_proj/down_proj.*  blocks.i.mlp.w1/w2/w3.*
    blocks.i.norm{1,2}.*, norm.*      layer.i.norm{1,2}.*, norm.*                the same

Dropped: the mask token, ``rope_embed.periods`` (read for the settings) and ``qkv.bias_mask``, ViT-7B's
``local_cls_norm``; a non-zero key bias, a ``cls_norm`` or foreign keys raise. (1, 0, C) register tokens give no
``reg_token``. The settings the weights' shapes do not show come from the source (:func:`official_dinov3_settings`:
the RoPE periods; :func:`hf_dinov3_settings`: ``config.json``) as ``DINOv3`` keywords.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import Tensor

from ..fileio.checkpoint import strip_prefix
from .eomt import _HEAD_RULES, _sub_first

_OFFICIAL_BLOCK = [  # (official, beit_mm) inside blocks.i.
    (r'^ls1\.gamma$', 'gamma_1'), (r'^ls2\.gamma$', 'gamma_2'), (r'^attn\.qkv\.weight$', 'attn.qkv.weight'),
    (r'^(norm1|norm2|attn\.proj|mlp\.fc1|mlp\.fc2|mlp\.w1|mlp\.w2|mlp\.w3)\.(weight|bias)$', r'\1.\2'),
]
_HF_BLOCK = [  # (HF, beit_mm) inside layer.i. / layers.i.
    (r'^layer_scale1\.lambda1$', 'gamma_1'), (r'^layer_scale2\.lambda1$', 'gamma_2'),
    (r'^attention\.o_proj\.', 'attn.proj.'), (r'^(norm1|norm2)\.', r'\1.'),
    (r'^mlp\.gate_proj\.', 'mlp.w1.'), (r'^mlp\.down_proj\.', '{down}.'), (r'^mlp\.up_proj\.', '{up}.'),
]


#: transformers' defaults of the settings a ``config.json`` may leave out, by ``model_type`` (DINOv3ViTConfig
#: 4.57.6, EomtDinov3Config 5.2).
HF_DEFAULTS: dict[str, dict] = {
    'dinov3_vit': dict(patch_size=16, num_attention_heads=6, num_register_tokens=0, layer_norm_eps=1e-5,
                       rope_theta=100.0, hidden_act='gelu', use_gated_mlp=False),
    'eomt_dinov3': dict(patch_size=16, num_attention_heads=16, num_register_tokens=4, layer_norm_eps=1e-6,
                        rope_theta=100.0, hidden_act='gelu', use_gated_mlp=False),
}


def rope_settings(periods: Tensor) -> dict:
    """The DINOv3 ``rope_base`` (or ``rope_min_period``/``rope_max_period``) that give the (D/4,) ``periods``.

    Returns:
        ``{'rope_base': b, 'rope_min_period': None, 'rope_max_period': None}`` when ``periods[0]`` is 1
        (``b ** (4k / D)``), else the log-spaced form's ``{'rope_base': None, 'rope_min_period': .., ..}``; ``{}``
        for a head of width 4 (one period, 1 for every base).

    Raises:
        ValueError: the periods follow neither form.
    """
    from ..models.layers.rope import rope_periods
    p, n = periods.double(), periods.numel()
    if n == 1:
        return {}
    if abs(p[0].item() - 1.0) < 1e-6:
        out = dict(rope_base=float(f'{p[-1].item() ** (n / (n - 1)):.6g}'), rope_min_period=None, rope_max_period=None)
    else:
        out = dict(rope_base=None, rope_min_period=float(f'{p[0].item():.6g}'),
                   rope_max_period=float(f'{p[-1].item():.6g}'))
    expected = rope_periods(4 * n, out['rope_base'], out['rope_min_period'], out['rope_max_period'])
    if not torch.allclose(periods.float(), expected, rtol=1e-5):
        raise ValueError(f'rope_embed.periods {periods[:4].tolist()}... are neither base ** (4k / D) nor log-spaced '
                         'between two periods, the forms DINOv3\'s RoPE computes')
    return out


def official_dinov3_settings(state_dict: Mapping[str, Tensor]) -> dict:
    """The beit_mm ``DINOv3`` settings a facebookresearch/dinov3 ViT state dict shows: ``patch_size``,
    ``num_register_tokens``, ``num_heads`` (the width over the RoPE head width) and the rotary periods
    (:func:`rope_settings`); the file declares no norm eps or coordinate normalization.

    Raises:
        ValueError: not a facebookresearch/dinov3 ViT state dict, or periods of no DINOv3 form.
    """
    if 'rope_embed.periods' not in state_dict or 'cls_token' not in state_dict:
        raise ValueError('not a facebookresearch/dinov3 ViT state dict (no rope_embed.periods / cls_token)')
    periods = state_dict['rope_embed.periods']
    storage = state_dict.get('storage_tokens')
    return dict(patch_size=int(state_dict['patch_embed.proj.weight'].shape[-1]),
                num_heads=state_dict['cls_token'].shape[-1] // (4 * periods.numel()),
                num_register_tokens=0 if storage is None else int(storage.shape[1]), **rope_settings(periods))


def hf_dinov3_settings(config: Mapping, source: str) -> dict:
    """The beit_mm ``DINOv3`` settings an HF ``DINOv3ViTConfig`` / ``EomtDinov3Config`` (``config.json``) declares:
    ``patch_size``, ``num_heads``, ``num_register_tokens``, ``rope_base`` (``rope_theta``, or
    ``rope_parameters.rope_theta``), ``rope_normalize_coords`` (transformers' is ``'separate'``) and ``norm_eps``
    (``layer_norm_eps``); a key left out takes transformers' default (:data:`HF_DEFAULTS`).

    Raises:
        ValueError: naming ``source``: another ``model_type``, a RoPE type other than the default, or an
            activation beit_mm's DINOv3 does not have.
    """
    model_type = config.get('model_type')
    if model_type not in HF_DEFAULTS:
        raise ValueError(f'{source} has model_type {model_type!r}, not one of {sorted(HF_DEFAULTS)}. Fix: put the '
                         'config.json of the checkpoint\'s own HF repository beside it')
    cfg = {**HF_DEFAULTS[model_type], **config}
    rope = cfg.get('rope_parameters') or {}
    if rope.get('rope_type', 'default') != 'default':
        raise ValueError(f'{source} declares rope_type {rope["rope_type"]!r}; beit_mm\'s DINOv3 has DINOv3\'s '
                         'default RoPE only')
    act = 'silu' if cfg['use_gated_mlp'] else 'gelu'
    if cfg['hidden_act'] != act:
        raise ValueError(f'{source} declares hidden_act {cfg["hidden_act"]!r} with use_gated_mlp='
                         f'{cfg["use_gated_mlp"]}; beit_mm\'s DINOv3 has {act!r} there only')
    return dict(patch_size=int(cfg['patch_size']), num_heads=int(cfg['num_attention_heads']),
                num_register_tokens=int(cfg['num_register_tokens']),
                rope_base=float(rope.get('rope_theta', cfg['rope_theta'])), rope_min_period=None,
                rope_max_period=None, rope_normalize_coords='separate', norm_eps=float(cfg['layer_norm_eps']))


def check_settings_fit_weights(settings: Mapping, state_dict: Mapping[str, Tensor], source: str,
                               prefix: str = '') -> None:
    """Raise unless a converted ``state_dict`` (the DINOv3's keys under ``prefix``) has the register count and patch
    size ``settings`` declare, and a width that ``num_heads`` heads of a multiple of 4 divide.

    Raises:
        ValueError: naming ``source``, each setting and what the weights show (the config of another model).
    """
    regs = state_dict.get(f'{prefix}reg_token')
    width = state_dict[f'{prefix}cls_token'].shape[-1]
    shows = {'num_register_tokens': 0 if regs is None else regs.shape[1],
             'patch_size': state_dict[f'{prefix}patch_embed.proj.weight'].shape[-1]}
    wrong = [f'{k} {settings[k]} (the weights: {v})' for k, v in shows.items() if settings.get(k, v) != v]
    heads = settings.get('num_heads')
    if heads is not None and (width % heads or width // heads % 4):
        wrong.append(f'num_heads {heads} (the weights: width {width}, not {heads} heads of a multiple of 4)')
    if wrong:
        raise ValueError(f'{source} declares {", ".join(wrong)}: the config of another model. Fix: use the '
                         'config.json of the weights\' own HF repository')


def _take_registers(sd: dict[str, Tensor], key: str, out: dict[str, Tensor], name: str) -> None:
    """Pop the (1, R, C) register tokens ``key`` of ``sd`` into ``out[name]``; R = 0 leaves none (beit_mm's
    ``DINOv3(num_register_tokens=0)`` has no ``reg_token``)."""
    tokens = sd.pop(key, None)
    if tokens is not None and tokens.shape[1] > 0:
        out[name] = tokens


def official_dinov3_to_beit_mm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A facebookresearch/dinov3 ViT state dict -> a beit_mm ``DINOv3`` one; ValueError for
    other layouts."""
    sd = dict(state_dict)
    if 'rope_embed.periods' not in sd or 'blocks.0.attn.qkv.weight' not in sd:
        raise ValueError('not a facebookresearch/dinov3 ViT state dict (no rope_embed.periods / blocks.0.attn.qkv); '
                         'an HF DINOv3ViTModel file converts with --source hf')
    rope_settings(sd.pop('rope_embed.periods'))
    if 'cls_norm.weight' in sd:
        raise ValueError('the checkpoint has an untied cls norm (cls_norm.*, untie_cls_and_patch_norms=True), which '
                         'beit_mm\'s DINOv3 does not hold (no LVD-1689M release has one)')
    out = {'cls_token': sd.pop('cls_token'),
           'patch_embed.proj.weight': sd.pop('patch_embed.proj.weight'),
           'patch_embed.proj.bias': sd.pop('patch_embed.proj.bias')}
    _take_registers(sd, 'storage_tokens', out, 'reg_token')
    for key in [k for k in sd if k.startswith('blocks.')]:
        i, rest = key.split('.', 2)[1:]
        p = f'blocks.{i}.'
        if rest in ('attn.qkv.bias', 'attn.qkv.bias_mask'):
            continue
        name = _sub_first(rest, _OFFICIAL_BLOCK)
        if name is not None:
            out[p + name] = sd.pop(key)
    for i in sorted({int(k.split('.')[1]) for k in sd if k.startswith('blocks.') and k.endswith('attn.qkv.bias')}):
        bias = sd.pop(f'blocks.{i}.attn.qkv.bias')
        mask = sd.pop(f'blocks.{i}.attn.qkv.bias_mask', None)
        q, k, v = (bias if mask is None else bias * mask.to(bias.dtype)).chunk(3)
        if k.abs().max() > 0:
            raise ValueError(f'block {i} has a key bias (mask_k_bias=False): RoPE makes it change the attention, and '
                             'beit_mm\'s DINOv3 attention has none (every LVD-1689M ViT masks it to zero)')
        out[f'blocks.{i}.attn.q_bias'], out[f'blocks.{i}.attn.v_bias'] = q, v
    for key in ('norm.weight', 'norm.bias'):
        if key in sd:
            out[key] = sd.pop(key)
    for key in ('mask_token', 'local_cls_norm.weight', 'local_cls_norm.bias'):
        sd.pop(key, None)
    if sd:
        raise ValueError(f'{len(sd)} DINOv3 keys have no beit_mm counterpart (first: {sorted(sd)[:5]})')
    return out


def _hf_layers(sd: dict[str, Tensor], layer_prefix: str, out_prefix: str) -> dict[str, Tensor]:
    """Pop HF DINOv3 layers ``{layer_prefix}i.*`` out of ``sd`` into beit_mm block names under ``out_prefix``."""
    out: dict[str, Tensor] = {}
    layers = sorted({int(k[len(layer_prefix):].split('.')[0]) for k in sd if k.startswith(layer_prefix)})
    for i in layers:
        hp, p = f'{layer_prefix}{i}.', f'{out_prefix}blocks.{i}.'
        gated = f'{hp}mlp.gate_proj.weight' in sd
        names = {'down': 'mlp.w3' if gated else 'mlp.fc2', 'up': 'mlp.w2' if gated else 'mlp.fc1'}
        try:
            out[p + 'attn.qkv.weight'] = torch.cat([sd.pop(f'{hp}attention.{n}_proj.weight') for n in 'qkv'])
        except KeyError as error:
            raise ValueError(f'layer {i}: missing {error.args[0]} (HF DINOv3 attention has q/k/v/o projections)') \
                from None
        k_bias = sd.pop(f'{hp}attention.k_proj.bias', None)
        if k_bias is not None and k_bias.abs().max() > 0:
            raise ValueError(f'layer {i} has a key bias (key_bias=True): RoPE makes it change the attention, and '
                             'beit_mm\'s DINOv3 attention has none (the released models have key_bias=False)')
        for n in 'qv':
            if f'{hp}attention.{n}_proj.bias' in sd:
                out[f'{p}attn.{n}_bias'] = sd.pop(f'{hp}attention.{n}_proj.bias')
        for key in [k for k in sd if k.startswith(hp)]:
            name = _sub_first(key[len(hp):], _HF_BLOCK)
            if name is not None:
                out[p + name.format(**names)] = sd.pop(key)
    return out


def hf_dinov3_to_beit_mm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A transformers ``DINOv3ViTModel`` state dict -> a beit_mm ``DINOv3`` one; ValueError for
    other layouts."""
    sd = dict(state_dict)
    if 'embeddings.cls_token' not in sd or 'layer.0.attention.q_proj.weight' not in sd:
        raise ValueError('not a transformers DINOv3ViTModel state dict (no embeddings.cls_token / '
                         'layer.0.attention.q_proj.weight); an official dinov3 .pth converts with --source official')
    out = {'cls_token': sd.pop('embeddings.cls_token'),
           'patch_embed.proj.weight': sd.pop('embeddings.patch_embeddings.weight'),
           'patch_embed.proj.bias': sd.pop('embeddings.patch_embeddings.bias')}
    _take_registers(sd, 'embeddings.register_tokens', out, 'reg_token')
    sd.pop('embeddings.mask_token', None)
    out.update(_hf_layers(sd, 'layer.', ''))
    for key in ('norm.weight', 'norm.bias'):
        if key in sd:
            out[key] = sd.pop(key)
    if sd:
        raise ValueError(f'{len(sd)} HF DINOv3 keys have no beit_mm counterpart (first: {sorted(sd)[:5]})')
    return out


def is_hf_eomt_dinov3(state_dict: Mapping[str, Tensor]) -> bool:
    """Whether a state dict is transformers' ``EomtDinov3ForUniversalSegmentation`` (RoPE, no position embedding)."""
    return any(re.match(r'^(eomt_dinov3\.)?layers\.0\.attention\.o_proj\.', k) for k in state_dict)


def hf_eomt_dinov3_to_beit_mm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """An ``EomtDinov3ForUniversalSegmentation`` state dict -> a beit_mm ``EoMT`` one on a
    ``DINOv3`` backbone."""
    sd = dict(strip_prefix(state_dict, 'eomt_dinov3.') if any(k.startswith('eomt_dinov3.') for k in state_dict)
              else state_dict)
    if 'query.weight' not in sd or not is_hf_eomt_dinov3(sd):
        raise ValueError('not an HF EomtDinov3ForUniversalSegmentation state dict (no query.weight / '
                         'layers.0.attention.o_proj)')
    out = {'backbone.cls_token': sd.pop('embeddings.cls_token'),
           'backbone.patch_embed.proj.weight': sd.pop('embeddings.patch_embeddings.weight'),
           'backbone.patch_embed.proj.bias': sd.pop('embeddings.patch_embeddings.bias')}
    _take_registers(sd, 'embeddings.register_tokens', out, 'backbone.reg_token')
    sd.pop('embeddings.mask_token', None)
    out.update(_hf_layers(sd, 'layers.', 'backbone.'))
    for key in list(sd):
        name = _sub_first(key, _HEAD_RULES)
        if name is not None:
            out[name] = sd.pop(key)
    sd.pop('criterion.empty_weight', None)  # the loss's buffer: beit_mm's loss config holds no_object_weight
    if sd:
        raise ValueError(f'{len(sd)} HF EoMT-DINOv3 keys have no beit_mm counterpart (first: {sorted(sd)[:5]})')
    return out
