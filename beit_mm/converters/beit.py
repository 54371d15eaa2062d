"""BEiT checkpoints of unilm, timm, HF transformers, mmseg and mmpretrain -> beit_mm ``BEiT`` names (unilm's).

The output loads strictly into the matching ``BEiT``: a shared relative position bias is copied per block unless
``expand_shared_bias=False``, MIM-only keys are dropped unless ``keep_mim_head``, ``img_size`` resamples the tables.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from ..fileio.checkpoint import rename_keys as _rename
from ..fileio.checkpoint import strip_prefix
from ..models.backbones.beit import expand_shared_rel_pos_bias, resize_to_grid

SOURCES = ('unilm', 'timm', 'hf', 'mmseg', 'mmpretrain')
HEAD_PREFIXES = ('fc_norm.', 'head.')
MIM_KEYS = ('mask_token', 'lm_head.', 'cls_pt_layers.')


def _from_unilm(sd: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """unilm (and timm, which uses the same names): strip a segmentor's ``backbone.`` prefix, drop its neck/heads."""
    if any(k.startswith('backbone.') for k in sd):  # unilm ADE20K files: backbone.* + decode/auxiliary heads
        sd = strip_prefix(sd, 'backbone.')
        sd = {k: v for k, v in sd.items() if not re.match(r'fpn\d\.', k)}
    return dict(sd)


def _from_hf(sd: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """HF ``BeitModel``/``BeitFor*``: split names back into unilm's, merge query/key/value into ``qkv``."""
    sd = {k[len('beit.'):] if k.startswith('beit.') else k: v for k, v in sd.items()}
    sd = {k: v for k, v in sd.items() if not k.startswith(('decode_head.', 'auxiliary_head.', 'fpn'))}
    rules = [
        (r'^embeddings\.cls_token$', 'cls_token'),
        (r'^embeddings\.mask_token$', 'mask_token'),
        (r'^embeddings\.position_embeddings$', 'pos_embed'),
        (r'^embeddings\.patch_embeddings\.projection\.', 'patch_embed.proj.'),
        (r'^encoder\.relative_position_bias\.', 'rel_pos_bias.'),
        (r'^encoder\.layer\.(\d+)\.', r'blocks.\1.'),
        (r'\.layernorm_before\.', '.norm1.'),
        (r'\.layernorm_after\.', '.norm2.'),
        (r'\.attention\.attention\.relative_position_bias\.', '.attn.'),
        (r'\.attention\.output\.dense\.', '.attn.proj.'),
        (r'\.intermediate\.dense\.', '.mlp.fc1.'),
        (r'\.output\.dense\.', '.mlp.fc2.'),
        (r'\.lambda_1$', '.gamma_1'),
        (r'\.lambda_2$', '.gamma_2'),
        (r'^pooler\.layernorm\.', 'fc_norm.'),
        (r'^layernorm\.', 'norm.'),
        (r'^classifier\.', 'head.'),
    ]
    out = _rename(sd, rules)
    for key in [k for k in out if k.endswith('.attention.attention.query.weight')]:
        base = key[:-len('.attention.attention.query.weight')]
        q, k, v = (out.pop(f'{base}.attention.attention.{n}.weight') for n in ('query', 'key', 'value'))
        out[f'{base}.attn.qkv.weight'] = torch.cat([q, k, v], dim=0)
        out[f'{base}.attn.q_bias'] = out.pop(f'{base}.attention.attention.query.bias')
        out[f'{base}.attn.v_bias'] = out.pop(f'{base}.attention.attention.value.bias')
    return out


def _from_openmmlab(sd: Mapping[str, Tensor], final_norm: str, pool_norm: str | None) -> dict[str, Tensor]:
    """mmseg/mmpretrain backbones: ``layers.i.ln1``, ``ffn.layers.0.0``, ``patch_embed.projection`` ..."""
    if any(k.startswith('backbone.') for k in sd):
        # mmpretrain MIM model: v1 BEiTV1Head / v2 BEiTV2Head ``head.cls_head`` is unilm's lm_head; v2's BEiTV2Neck
        # holds the final norm and the cls-token pretraining blocks (mmpretrain beitv2_neck.py)
        extra = {f'lm_head.{k[len("head.cls_head."):]}': v for k, v in sd.items() if k.startswith('head.cls_head.')}
        extra.update({f'{final_norm}.{k[len("neck.norm."):]}': v for k, v in sd.items() if k.startswith('neck.norm.')})
        extra.update({f'cls_pt_layers.{k[len("neck.patch_aggregation."):]}': v for k, v in sd.items()
                      if k.startswith('neck.patch_aggregation.')})
        sd = {**strip_prefix(sd, 'backbone.'), **extra}
    rules = [
        (r'^patch_embed\.projection\.', 'patch_embed.proj.'),
        (r'^layers\.(\d+)\.', r'blocks.\1.'),
        (r'\.ln1\.', '.norm1.'),
        (r'\.ln2\.', '.norm2.'),
        (r'\.ffn\.layers\.0\.0\.', '.mlp.fc1.'),
        (r'\.ffn\.layers\.1\.', '.mlp.fc2.'),
        (rf'^{final_norm}\.', 'norm.'),
    ]
    if pool_norm is not None:
        rules.append((rf'^{pool_norm}\.', 'fc_norm.'))
    return _rename(sd, rules)


CONVERTERS: dict[str, Callable[[Mapping[str, Tensor]], dict[str, Tensor]]] = {
    'unilm': _from_unilm,
    'timm': _from_unilm,
    'hf': _from_hf,
    'mmseg': lambda sd: _from_openmmlab(sd, final_norm='ln1', pool_norm=None),
    'mmpretrain': lambda sd: _from_openmmlab(sd, final_norm='ln1', pool_norm='ln2'),
}


def convert_beit(state_dict: Mapping[str, Tensor],
                 source: str,
                 img_size: int | None = None,
                 patch_size: int = 16,
                 expand_shared_bias: bool = True,
                 keep_mim_head: bool = False,
                 keep_head: bool = False) -> dict[str, Tensor]:
    """A foreign BEiT state dict -> beit_mm ``BEiT`` state dict (see the module docstring)."""
    if source not in CONVERTERS:
        raise ValueError(f'unknown BEiT checkpoint source {source!r}; choose one of {SOURCES}')
    sd = CONVERTERS[source](state_dict)
    sd = {k: v for k, v in sd.items() if not k.endswith('relative_position_index')}
    if expand_shared_bias:
        sd = expand_shared_rel_pos_bias(sd)
    if not keep_mim_head:
        sd = {k: v for k, v in sd.items() if not k.startswith(MIM_KEYS)}
    if not keep_head:
        sd = {k: v for k, v in sd.items() if not k.startswith(HEAD_PREFIXES)}
    if img_size is not None:
        sd = resize_to_grid(sd, (img_size // patch_size, img_size // patch_size))
    check_beit_keys(sd, source)
    return sd


KNOWN_KEY = re.compile(r'^(cls_token|mask_token|pos_embed|patch_embed\.proj\.(weight|bias)|norm\.(weight|bias)|'
                       r'rel_pos_bias\.relative_position_bias_table|lm_head\.(weight|bias)|fc_norm\.(weight|bias)|'
                       r'head\.(weight|bias)|blocks\.\d+\.(norm1|norm2|attn\.proj|mlp\.fc1|mlp\.fc2)\.(weight|bias)|'
                       r'blocks\.\d+\.attn\.(qkv\.weight|q_bias|v_bias|relative_position_bias_table)|'
                       r'blocks\.\d+\.gamma_[12]|'
                       r'cls_pt_layers\.\d+\.(norm1|norm2|attn\.proj|mlp\.fc1|mlp\.fc2)\.(weight|bias)|'
                       r'cls_pt_layers\.\d+\.attn\.(qkv\.weight|q_bias|v_bias|relative_position_bias_table)|'
                       r'cls_pt_layers\.\d+\.gamma_[12])$')


def check_beit_keys(state_dict: Mapping[str, Tensor], source: str) -> None:
    """Raise if the converted keys are not BEiT's: the file is of another layout than ``source``."""
    bad = [k for k in state_dict if not KNOWN_KEY.match(k)]
    if bad or 'patch_embed.proj.weight' not in state_dict:
        guess = guess_beit_source(state_dict)
        hint = f'it looks like --source {guess}' if guess and guess != source else 'is it a BEiT checkpoint?'
        raise ValueError(f'{len(bad)} keys of this checkpoint are not BEiT keys after --source {source} conversion '
                         f'(first: {bad[:5]}); {hint}')


def guess_beit_source(state_dict: Mapping[str, Tensor]) -> str | None:
    """Best guess of the layout of a BEiT state dict, for error messages."""
    keys = set(state_dict)
    joined = ' '.join(keys)
    if 'encoder.layer.' in joined:
        return 'hf'
    if 'layers.0.ln1' in joined or 'patch_embed.projection' in joined:
        mmpretrain_only = {'ln2.weight', 'rel_pos_bias.relative_position_bias_table', 'backbone.ln2.weight'}
        return 'mmpretrain' if keys & mmpretrain_only else 'mmseg'
    if 'blocks.0.attn.qkv' in joined:
        return 'unilm'
    return None


_TO_HF_RULES = [
    (r'^cls_token$', 'embeddings.cls_token'),
    (r'^mask_token$', 'embeddings.mask_token'),
    (r'^pos_embed$', 'embeddings.position_embeddings'),
    (r'^patch_embed\.proj\.', 'embeddings.patch_embeddings.projection.'),
    (r'^rel_pos_bias\.', 'encoder.relative_position_bias.'),
    (r'^blocks\.(\d+)\.', r'encoder.layer.\1.'),
    (r'\.norm1\.', '.layernorm_before.'),
    (r'\.norm2\.', '.layernorm_after.'),
    (r'\.attn\.relative_position_bias_table$', '.attention.attention.relative_position_bias.relative_position_bias_table'),
    (r'\.attn\.proj\.', '.attention.output.dense.'),
    (r'\.mlp\.fc1\.', '.intermediate.dense.'),
    (r'\.mlp\.fc2\.', '.output.dense.'),
    (r'\.gamma_1$', '.lambda_1'),
    (r'\.gamma_2$', '.lambda_2'),
    (r'^fc_norm\.', 'pooler.layernorm.'),
    (r'^norm\.', 'layernorm.'),
]


def beit_to_hf(state_dict: Mapping[str, Tensor], prefix: str = '') -> dict[str, Tensor]:
    """beit_mm ``BEiT`` state dict (+ ``fc_norm.*``) -> HF ``BeitModel`` names, the inverse of ``_from_hf``.

    ``qkv.weight`` (3C, C) is split into ``query``/``key``/``value`` (C, C); ``prefix`` is ``'beit.'`` inside
    ``BeitFor*`` models, ``''`` for a bare ``BeitModel``; head keys are the caller's to map.
    """
    check_beit_keys(state_dict, 'beit_mm')
    out: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        if key.startswith(('head.', 'lm_head.')) or key.endswith('relative_position_index'):
            continue
        match = re.match(r'^blocks\.(\d+)\.attn\.(qkv\.weight|q_bias|v_bias)$', key)
        if match:
            base = f'{prefix}encoder.layer.{match.group(1)}.attention.attention'
            if match.group(2) == 'qkv.weight':
                for name, part in zip(('query', 'key', 'value'), value.chunk(3, dim=0)):
                    out[f'{base}.{name}.weight'] = part.clone()
            else:
                out[f'{base}.{"query" if match.group(2) == "q_bias" else "value"}.bias'] = value
            continue
        for pattern, repl in _TO_HF_RULES:
            key = re.sub(pattern, repl, key)
        out[prefix + key] = value
    return out


def beit_to_timm(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """beit_mm ``BEiT`` state dict -> timm ``Beit`` (the same names), without ``mask_token``/``lm_head.*``."""
    check_beit_keys(state_dict, 'beit_mm')
    return {k: v for k, v in state_dict.items() if not k.startswith(MIM_KEYS) and
            not k.endswith('relative_position_index')}
