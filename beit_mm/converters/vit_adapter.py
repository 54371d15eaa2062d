"""Convert official ViT-Adapter BEiT segmentors (czczup/ViT-Adapter ``segmentation/``, mmseg 0.x) to beit_mm.

:class:`beit_mm.BEiTAdapter` keeps the official parameter names, so the backbone converts by stripping the
segmentor's ``backbone.`` and dropping the ``relative_position_index`` buffers (beit_mm computes them); every other
key must be one of the official BEiTAdapter's (:data:`KNOWN_KEY`, from ``beit_adapter.py``, ``adapter_modules.py`` and
``base/beit.py``), or the file is refused with the keys named. ``keep_heads=True`` keeps a UPerNet segmentor's
``decode_head.*``/``auxiliary_head.*`` (mmseg 0.x's UPerHead and FCNHead, whose names mmseg 1.x kept) under a
``backbone.``-prefixed whole-segmentor dict; ViT-Adapter's Mask2Former head (mmdet 2.x parts in ``mmseg_custom``) has
other names than mmseg 1.x's ``Mask2FormerHead`` and is refused.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

from ..fileio.checkpoint import strip_prefix

_BLOCK = r'blocks\.\d+\.(norm[12]\.(weight|bias)|attn\.(qkv\.weight|q_bias|v_bias|relative_position_bias_table|' \
         r'proj\.(weight|bias))|mlp\.fc[12]\.(weight|bias)|gamma_[12])'
_DEFORM = r'attn\.(sampling_offsets|attention_weights|value_proj|output_proj)\.(weight|bias)'
_EXTRACTOR = rf'(query_norm|feat_norm|ffn_norm)\.(weight|bias)|{_DEFORM}|ffn\.(fc[12]|dwconv\.dwconv)\.(weight|bias)'
_BN = r'(weight|bias|running_mean|running_var|num_batches_tracked)'
KNOWN_KEY = re.compile(
    rf'^(cls_token|patch_embed\.proj\.(weight|bias)|level_embed|{_BLOCK}|'
    rf'spm\.(stem\.[036]\.weight|stem\.[147]\.{_BN}|conv[234]\.0\.weight|conv[234]\.1\.{_BN}|fc[1-4]\.(weight|bias))|'
    rf'interactions\.\d+\.injector\.(gamma|(query_norm|feat_norm)\.(weight|bias)|{_DEFORM})|'
    rf'interactions\.\d+\.(extractor|extra_extractors\.[01])\.({_EXTRACTOR})|'
    rf'up\.(weight|bias)|norm[1-4]\.{_BN})$')
UPERNET_HEADS = ('decode_head.', 'auxiliary_head.')


def convert_vit_adapter(state_dict: Mapping[str, Tensor], keep_heads: bool = False) -> dict[str, Tensor]:
    """An official ViT-Adapter BEiT segmentor (or backbone) state dict -> a ``BEiTAdapter`` state dict that loads
    with ``strict=True``; with ``keep_heads``, a whole UPerNet segmentor's (``backbone.*`` + heads)."""
    backbone = strip_prefix(state_dict, 'backbone.') if any(k.startswith('backbone.') for k in state_dict) \
        else dict(state_dict)
    backbone = {k: v for k, v in backbone.items() if not k.endswith('relative_position_index')}
    bad = [k for k in backbone if not KNOWN_KEY.match(k)]
    if bad or 'level_embed' not in backbone:
        raise ValueError(f'{len(bad)} keys are not official ViT-Adapter BEiTAdapter keys (first: {bad[:5]})'
                         f'{"" if "level_embed" in backbone else " and level_embed is missing"}; is this a '
                         'ViT-Adapter BEiT file? A plain BEiT converts with --model beit and loads into BEiTAdapter '
                         'with init_cfg.keep_init=ADAPTER_WEIGHTS')
    if not keep_heads:
        return backbone
    heads = {k: v for k, v in state_dict.items() if not k.startswith('backbone.')}
    other = [k for k in heads if not k.startswith(UPERNET_HEADS)]
    if other or not heads:
        raise ValueError(f'keep_heads converts UPerNet segmentors only (decode_head.*, auxiliary_head.*); this file '
                         f'has {len(other)} other keys (first: {other[:5]}) or no heads. ViT-Adapter\'s Mask2Former '
                         'head (mmdet 2.x names) does not map onto mmseg 1.x Mask2FormerHead: convert the backbone '
                         'only (without --keep-head) and train the head')
    return {**{f'backbone.{k}': v for k, v in backbone.items()}, **heads}
