"""mmseg's BEiT + UPerNet segmentor (``EncoderDecoder``: ``beit_mm.BEiT``, ``Feature2Pyramid``, ``UPerHead``,
``FCNHead``) <-> HF transformers ``BeitForSemanticSegmentation`` state dicts (pure functions, no I/O).

HF's port copies mmseg's modules, so only a few names differ::

    backbone.*                        beit.*                     (beit_mm.converters.beit.beit_to_hf / _from_hf)
    neck.upsample_4x.{0,1,3}.*        fpn1.{0,1,3}.*             ConvT, BN (running stats too), GELU, ConvT
    neck.upsample_2x.0.*              fpn2.0.*                   ConvT
    decode_head.conv_seg.*            decode_head.classifier.*
    auxiliary_head.conv_seg.*         auxiliary_head.classifier.*
    decode_head.{psp_modules,bottleneck,lateral_convs,fpn_convs,fpn_bottleneck}.*.{conv,bn}.*   same names
    auxiliary_head.{convs,conv_cat}.*.{conv,bn}.*                                               same names
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

from .beit import beit_to_hf, convert_beit
from ..fileio.checkpoint import strip_prefix

_HEAD_RULES = [  # (mmseg, HF), on the keys outside the backbone
    (r'^neck\.upsample_4x\.', 'fpn1.'),
    (r'^neck\.upsample_2x\.', 'fpn2.'),
    (r'^(decode_head|auxiliary_head)\.conv_seg\.', r'\1.classifier.'),
]
_HEAD_RULES_BACK = [
    (r'^fpn1\.', 'neck.upsample_4x.'),
    (r'^fpn2\.', 'neck.upsample_2x.'),
    (r'^(decode_head|auxiliary_head)\.classifier\.', r'\1.conv_seg.'),
]
_HEAD_KEY = re.compile(r'^(neck\.upsample_[24]x|decode_head|auxiliary_head)\.')
_HF_HEAD_KEY = re.compile(r'^(fpn[12]|decode_head|auxiliary_head)\.')


def _rename(key: str, rules: list[tuple[str, str]]) -> str:
    for pattern, repl in rules:
        key = re.sub(pattern, repl, key)
    return key


def segmentor_to_hf(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A beit_mm BEiT + UPerNet segmentor state dict -> ``BeitForSemanticSegmentation`` names; ValueError
    for keys outside the table."""
    backbone = strip_prefix(state_dict, 'backbone.')
    rest = {k: v for k, v in state_dict.items() if not k.startswith('backbone.')}
    bad = [k for k in rest if not _HEAD_KEY.match(k)]
    if bad or not backbone:
        raise ValueError(f'not a BEiT + Feature2Pyramid + UPerHead segmentor state dict: {len(bad)} keys outside '
                         f'backbone/neck/decode_head/auxiliary_head (first: {bad[:5]}), {len(backbone)} backbone keys')
    out = beit_to_hf(backbone, prefix='beit.')
    out.update({_rename(k, _HEAD_RULES): v for k, v in rest.items()})
    return out


def segmentor_from_hf(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``BeitForSemanticSegmentation`` state dict -> beit_mm segmentor names."""
    heads = {k: v for k, v in state_dict.items() if _HF_HEAD_KEY.match(k)}
    backbone = convert_beit({k: v for k, v in state_dict.items() if k not in heads}, 'hf', expand_shared_bias=False,
                            keep_mim_head=True, keep_head=True)
    out = {f'backbone.{k}': v for k, v in backbone.items()}
    out.update({_rename(k, _HEAD_RULES_BACK): v for k, v in heads.items()})
    return out
