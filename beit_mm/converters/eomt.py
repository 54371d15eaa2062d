"""HF transformers ``EomtForUniversalSegmentation`` <-> beit_mm ``EoMT`` on a DINOv2-style ``BEiT`` (pure functions).

HF's EoMT is a DINOv2 ViT with registers, held as ``BEiT(use_abs_pos_emb=True, no_embed_class=True,
num_register_tokens=R, use_rel_pos_bias=False)``::

    HF                                                beit_mm
    embeddings.cls_token / register_tokens            backbone.cls_token / backbone.reg_token
    embeddings.patch_embeddings.projection.*          backbone.patch_embed.proj.*
    embeddings.position_embeddings.weight (N, C)      backbone.pos_embed (1, N, C)
    layers.i.attention.{q,k,v}_proj.weight            backbone.blocks.i.attn.qkv.weight (3C, C), q|k|v rows
    layers.i.attention.q_proj.bias / v_proj.bias      backbone.blocks.i.attn.q_bias / v_bias
    layers.i.attention.k_proj.bias                    (none)
    layers.i.attention.out_proj.*                     backbone.blocks.i.attn.proj.*
    layers.i.layer_scale{1,2}.lambda1                 backbone.blocks.i.gamma_{1,2}
    layers.i.{norm1,norm2,mlp.fc1,mlp.fc2}.*          backbone.blocks.i.{same}.*
    layernorm.*                                       backbone.norm.*
    query.weight / class_predictor.*                  q.weight / class_head.*
    mask_head.fc{1,2,3}.*                             mask_head.{0,2,4}.*
    upscale_block.block.j.{conv1,conv2,layernorm2d}.* upscale.j.{conv1,conv2,norm}.*
    attn_mask_probs                                   attn_mask_probs

HF's key bias (the softmax cancels it) and ``criterion.empty_weight`` are dropped; the key bias is written back as zero.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import Tensor

from ..fileio.checkpoint import strip_prefix

_BLOCK_RULES = [  # (HF, beit_mm) inside layers.i.
    (r'^attention\.out_proj\.', 'attn.proj.'),
    (r'^layer_scale1\.lambda1$', 'gamma_1'),
    (r'^layer_scale2\.lambda1$', 'gamma_2'),
    (r'^(norm1|norm2|mlp\.fc1|mlp\.fc2)\.', r'\1.'),
]
_HEAD_RULES = [  # (HF, beit_mm) outside the embeddings and layers
    (r'^layernorm\.', 'backbone.norm.'),
    (r'^query\.weight$', 'q.weight'),
    (r'^class_predictor\.', 'class_head.'),
    (r'^mask_head\.fc1\.', 'mask_head.0.'),
    (r'^mask_head\.fc2\.', 'mask_head.2.'),
    (r'^mask_head\.fc3\.', 'mask_head.4.'),
    (r'^upscale_block\.block\.(\d+)\.layernorm2d\.', r'upscale.\1.norm.'),
    (r'^upscale_block\.block\.(\d+)\.(conv1|conv2)\.', r'upscale.\1.\2.'),
    (r'^attn_mask_probs$', 'attn_mask_probs'),
]
_EMBED_RULES = [
    ('embeddings.cls_token', 'backbone.cls_token'),
    ('embeddings.register_tokens', 'backbone.reg_token'),
    ('embeddings.patch_embeddings.projection.weight', 'backbone.patch_embed.proj.weight'),
    ('embeddings.patch_embeddings.projection.bias', 'backbone.patch_embed.proj.bias'),
]
_DROPPED = ('criterion.empty_weight', )


def _sub_first(key: str, rules: list[tuple[str, str]]) -> str | None:
    for pattern, repl in rules:
        if re.search(pattern, key):
            return re.sub(pattern, repl, key)
    return None


def hf_eomt_to_beit_mm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """An ``EomtForUniversalSegmentation`` state dict -> a beit_mm ``EoMT`` one (the table above).

    Raises ValueError naming the keys it cannot place (e.g. EoMT-g's SwiGLU ``mlp.weights_in``).
    """
    sd = dict(strip_prefix(state_dict, 'eomt.') if any(k.startswith('eomt.') for k in state_dict) else state_dict)
    if 'query.weight' not in sd or 'embeddings.position_embeddings.weight' not in sd:
        raise ValueError('not an HF EomtForUniversalSegmentation state dict (no query.weight / '
                         'embeddings.position_embeddings.weight); for a BEiT use --model beit --source hf')
    out: dict[str, Tensor] = {}
    for hf, ours in _EMBED_RULES:
        if hf in sd:
            out[ours] = sd.pop(hf)
    out['backbone.pos_embed'] = sd.pop('embeddings.position_embeddings.weight')[None]
    for key in [k for k in sd if k.startswith('layers.')]:
        i, rest = key.split('.', 2)[1:]
        name = _sub_first(rest, _BLOCK_RULES)
        if name is not None:
            out[f'backbone.blocks.{i}.{name}'] = sd.pop(key)
    for i in sorted({int(k.split('.')[1]) for k in list(sd) if k.startswith('layers.') and '.attention.' in k}):
        p = f'layers.{i}.attention.'
        try:
            q, k, v = (sd.pop(f'{p}{n}_proj.weight') for n in 'qkv')
            out[f'backbone.blocks.{i}.attn.q_bias'] = sd.pop(f'{p}q_proj.bias')
            out[f'backbone.blocks.{i}.attn.v_bias'] = sd.pop(f'{p}v_proj.bias')
            sd.pop(f'{p}k_proj.bias')  # no effect on the attention output (module docstring)
        except KeyError as error:
            raise ValueError(f'layer {i}: missing {error.args[0]} (HF EoMT attention has q/k/v/out projections with '
                             'biases)') from None
        out[f'backbone.blocks.{i}.attn.qkv.weight'] = torch.cat([q, k, v])
    for key in list(sd):
        name = _sub_first(key, _HEAD_RULES)
        if name is not None:
            out[name] = sd.pop(key)
        elif key in _DROPPED:
            sd.pop(key)
    if sd:
        raise ValueError(f'{len(sd)} HF EoMT keys have no beit_mm counterpart (first: {sorted(sd)[:5]}); beit_mm '
                         'holds EoMT on DINOv2-style ViTs with a GELU MLP (use_swiglu_ffn=False)')
    return out


def beit_mm_to_hf_eomt(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A beit_mm ``EoMT`` state dict -> ``EomtForUniversalSegmentation`` names, with a zero key bias;
    missing layer scales and q/v biases are written as ones and zeros."""
    sd = dict(state_dict)
    out: dict[str, Tensor] = {}
    back_embed = {ours: hf for hf, ours in _EMBED_RULES}
    for key in list(sd):
        if key in back_embed:
            out[back_embed[key]] = sd.pop(key)
    out['embeddings.position_embeddings.weight'] = sd.pop('backbone.pos_embed')[0]
    blocks = sorted({int(k.split('.')[2]) for k in sd if k.startswith('backbone.blocks.')})
    for i in blocks:
        p, hp = f'backbone.blocks.{i}.', f'layers.{i}.'
        q, k, v = sd.pop(f'{p}attn.qkv.weight').chunk(3)
        dims = q.shape[0]
        for n, w in zip('qkv', (q, k, v)):
            out[f'{hp}attention.{n}_proj.weight'] = w
        out[f'{hp}attention.q_proj.bias'] = sd.pop(f'{p}attn.q_bias', torch.zeros(dims))
        out[f'{hp}attention.k_proj.bias'] = torch.zeros(dims)
        out[f'{hp}attention.v_proj.bias'] = sd.pop(f'{p}attn.v_bias', torch.zeros(dims))
        out[f'{hp}layer_scale1.lambda1'] = sd.pop(f'{p}gamma_1', torch.ones(dims))
        out[f'{hp}layer_scale2.lambda1'] = sd.pop(f'{p}gamma_2', torch.ones(dims))
        for key in [k for k in sd if k.startswith(p)]:
            rest = key[len(p):]
            name = 'attention.out_proj.' + rest[len('attn.proj.'):] if rest.startswith('attn.proj.') else rest
            out[hp + name] = sd.pop(key)
    back_head = [(r'^backbone\.norm\.', 'layernorm.'), (r'^q\.weight$', 'query.weight'),
                 (r'^class_head\.', 'class_predictor.'), (r'^mask_head\.0\.', 'mask_head.fc1.'),
                 (r'^mask_head\.2\.', 'mask_head.fc2.'), (r'^mask_head\.4\.', 'mask_head.fc3.'),
                 (r'^upscale\.(\d+)\.norm\.', r'upscale_block.block.\1.layernorm2d.'),
                 (r'^upscale\.(\d+)\.(conv1|conv2)\.', r'upscale_block.block.\1.\2.'),
                 (r'^attn_mask_probs$', 'attn_mask_probs')]
    for key in list(sd):
        name = _sub_first(key, back_head)
        if name is not None:
            out[name] = sd.pop(key)
    if sd:
        raise ValueError(f'{len(sd)} keys of the EoMT state dict have no HF EoMT counterpart (first: '
                         f'{sorted(sd)[:5]})')
    return out


#: beit_mm EoMT weights every EoMT state dict holds (what :func:`check_beit_mm_eomt` looks for).
_EOMT_KEYS = ('q.weight', 'class_head.weight', 'mask_head.0.weight', 'backbone.norm.weight')


def check_beit_mm_eomt(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A copy of ``state_dict`` when it is a beit_mm ``EoMT`` state dict; ValueError naming what it lacks otherwise."""
    lacking = [k for k in _EOMT_KEYS if k not in state_dict]
    if lacking:
        hint = ('an HF EomtForUniversalSegmentation file: use --source hf' if 'query.weight' in state_dict
                or 'eomt.query.weight' in state_dict else 'a beit_mm.EoMT checkpoint holds them')
        raise ValueError(f'not a beit_mm EoMT state dict (no {", ".join(lacking)}); {hint}')
    return dict(state_dict)


def drop_class_head(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A beit_mm ``EoMT`` state dict without ``class_head.*``: a new class set keeps its class head's init."""
    out = {k: v for k, v in state_dict.items() if not k.startswith('class_head.')}
    if len(out) == len(state_dict):
        raise ValueError('the state dict has no class_head.* weights to drop (not a beit_mm EoMT state dict)')
    return out


def reorder_classes(state_dict: Mapping[str, Tensor], order: tuple[int, ...]) -> dict[str, Tensor]:
    """A beit_mm ``EoMT`` state dict with ``class_head`` rows ``order`` then the "no object" row.

    Raises:
        ValueError: no ``class_head.*``, or a head of another class count than ``order`` (+1).
    """
    out = dict(state_dict)
    for name in ('class_head.weight', 'class_head.bias'):
        if name not in out:
            raise ValueError(f'the state dict has no {name} to reorder (not an EoMT with its class head)')
        rows = out[name].shape[0]
        if rows != len(order) + 1:
            raise ValueError(f'{name} has {rows} rows; this class order needs {len(order)} classes + "no object" '
                             f'= {len(order) + 1} (a checkpoint of another dataset?)')
        out[name] = out[name][list(order) + [len(order)]].clone()
    return out
