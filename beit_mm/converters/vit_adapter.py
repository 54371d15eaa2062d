"""Official ViT-Adapter BEiT segmentors (czczup/ViT-Adapter, mmseg 0.x) -> beit_mm, official names kept.

Converting strips ``backbone.``, drops ``relative_position_index`` and refuses keys outside :data:`KNOWN_KEY`;
``keep_heads`` keeps a UPerNet's heads; a Mask2Former head is refused.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

from ..fileio.checkpoint import strip_prefix, unwrap_state_dict

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
_CONV_MODULE = r'(conv\.(weight|bias)|bn\.' + _BN + ')'
UPERNET_HEAD_KEY = re.compile(  # mmseg 0.x UPerHead (decode_head) and FCNHead (auxiliary_head) state dict names
    r'^(decode_head|auxiliary_head)\.(conv_seg\.(weight|bias)|'
    rf'(psp_modules\.\d+\.1|bottleneck|lateral_convs\.\d+|fpn_convs\.\d+|fpn_bottleneck|convs\.\d+|conv_cat)\.'
    rf'{_CONV_MODULE})$')
MASK2FORMER_HEAD_KEY = re.compile(r'^decode_head\.(pixel_decoder|transformer_decoder|query_embed|query_feat|cls_embed|'
                                  r'mask_embed)\.')


def convert_vit_adapter(state_dict: Mapping[str, Tensor], keep_heads: bool = False) -> dict[str, Tensor]:
    """An official ViT-Adapter state dict -> a strict ``BEiTAdapter`` one (+ heads with ``keep_heads``)."""
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
    mask2former = [k for k in heads if MASK2FORMER_HEAD_KEY.match(k)]
    if mask2former:
        raise ValueError(
            f'this file holds ViT-Adapter\'s Mask2Former head ({len(heads)} head tensors under decode_head., e.g. '
            f'{mask2former[0]}): mmdet 2.x / mmcv 1.x names (attentions.N, ffns.0, ...) that beit_mm does not map '
            'onto mmseg 1.x\'s Mask2FormerHead; loaded as they are, most of them would stay at random init. Fix: '
            f'convert the backbone only (the same command without --keep-head: {len(backbone)} BEiTAdapter tensors) '
            'and train the Mask2Former head (configs/vit_adapter/mask2former_beit-adapter-*.py)')
    other = [k for k in heads if not UPERNET_HEAD_KEY.match(k)]
    if other or not heads:
        raise ValueError(f'keep_heads converts UPerNet segmentors only (mmseg 0.x UPerHead decode_head.*, FCNHead '
                         f'auxiliary_head.*); this file has {len(other)} other keys (first: {other[:5]}) or no heads. '
                         'Fix: convert the backbone only (without --keep-head) and train the head')
    return {**{f'backbone.{k}': v for k, v in backbone.items()}, **heads}


def dataset_meta(checkpoint: Mapping) -> dict | None:
    """``{'classes', 'palette'}`` of a checkpoint's ``meta`` (mmseg 1.x or 0.x); None without class names."""
    meta = checkpoint.get('meta')
    if not isinstance(meta, Mapping):
        return None
    if isinstance(meta.get('dataset_meta'), Mapping) and meta['dataset_meta'].get('classes'):
        found = meta['dataset_meta']
        classes, palette = found['classes'], found.get('palette')
    elif meta.get('CLASSES'):
        classes, palette = meta['CLASSES'], meta.get('PALETTE')
    else:
        return None
    out = {'classes': tuple(str(c) for c in classes)}
    if palette is not None:
        palette = [[int(c) for c in colour] for colour in palette]
        if len(palette) != len(out['classes']) or any(len(colour) != 3 for colour in palette):
            raise ValueError(f'the checkpoint\'s palette has {len(palette)} colours for {len(out["classes"])} classes '
                             '(or a colour without 3 values). Fix: correct meta.PALETTE / meta.dataset_meta.palette')
        out['palette'] = palette
    return out


def convert_vit_adapter_checkpoint(checkpoint: Mapping, keep_heads: bool = False) -> dict:
    """A loaded official checkpoint -> ``{'state_dict': ...}`` plus ``meta.dataset_meta``."""
    if not isinstance(checkpoint, Mapping):
        raise ValueError(f'the file holds a {type(checkpoint).__name__}, not a checkpoint dict (state_dict + meta)')
    out = {'state_dict': convert_vit_adapter(unwrap_state_dict(checkpoint), keep_heads=keep_heads)}
    found = dataset_meta(checkpoint)
    if found is not None:
        out['meta'] = {'dataset_meta': found}
    return out
