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

Dropped: the mask token, the checked ``rope_embed.periods`` and ``qkv.bias_mask``, ViT-7B's ``local_cls_norm``; a
non-zero key bias, a ``cls_norm`` or foreign keys raise.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import Tensor

from ..fileio.checkpoint import strip_prefix
from .eomt import _HEAD_RULES, _sub_first

#: The released ViTs' rotary base (dinov3/hub/backbones.py ``pos_embed_rope_base=100``).
ROPE_BASE = 100.0

_OFFICIAL_BLOCK = [  # (official, beit_mm) inside blocks.i.
    (r'^ls1\.gamma$', 'gamma_1'), (r'^ls2\.gamma$', 'gamma_2'), (r'^attn\.qkv\.weight$', 'attn.qkv.weight'),
    (r'^(norm1|norm2|attn\.proj|mlp\.fc1|mlp\.fc2|mlp\.w1|mlp\.w2|mlp\.w3)\.(weight|bias)$', r'\1.\2'),
]
_HF_BLOCK = [  # (HF, beit_mm) inside layer.i. / layers.i.
    (r'^layer_scale1\.lambda1$', 'gamma_1'), (r'^layer_scale2\.lambda1$', 'gamma_2'),
    (r'^attention\.o_proj\.', 'attn.proj.'), (r'^(norm1|norm2)\.', r'\1.'),
    (r'^mlp\.gate_proj\.', 'mlp.w1.'), (r'^mlp\.down_proj\.', '{down}.'), (r'^mlp\.up_proj\.', '{up}.'),
]


def check_rope_periods(periods: Tensor, base: float = ROPE_BASE) -> None:
    """Raise unless the (D/4,) ``periods`` are ``base ** (4k / D)``, the ones beit_mm's RoPE computes."""
    from ..models.layers.rope import rope_periods
    expected = rope_periods(4 * periods.numel(), base)
    if not torch.allclose(periods.float(), expected, rtol=1e-5):
        raise ValueError(f'rope_embed.periods {periods[:4].tolist()}... are not base {base:g}\'s '
                         f'{expected[:4].tolist()}...; build DINOv3 with the rope_base / rope_min_period / '
                         'rope_max_period the checkpoint was trained with')


def official_dinov3_to_beit_mm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A facebookresearch/dinov3 ViT state dict -> a beit_mm ``DINOv3`` one; ValueError for
    other layouts."""
    sd = dict(state_dict)
    if 'rope_embed.periods' not in sd or 'blocks.0.attn.qkv.weight' not in sd:
        raise ValueError('not a facebookresearch/dinov3 ViT state dict (no rope_embed.periods / blocks.0.attn.qkv); '
                         'an HF DINOv3ViTModel file converts with --source hf')
    check_rope_periods(sd.pop('rope_embed.periods'))
    if 'cls_norm.weight' in sd:
        raise ValueError('the checkpoint has an untied cls norm (cls_norm.*, untie_cls_and_patch_norms=True), which '
                         'beit_mm\'s DINOv3 does not hold (no LVD-1689M release has one)')
    out = {'cls_token': sd.pop('cls_token'),
           'patch_embed.proj.weight': sd.pop('patch_embed.proj.weight'),
           'patch_embed.proj.bias': sd.pop('patch_embed.proj.bias')}
    if 'storage_tokens' in sd:
        out['reg_token'] = sd.pop('storage_tokens')
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
    if 'embeddings.register_tokens' in sd:
        out['reg_token'] = sd.pop('embeddings.register_tokens')
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
    if 'embeddings.register_tokens' in sd:
        out['backbone.reg_token'] = sd.pop('embeddings.register_tokens')
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
