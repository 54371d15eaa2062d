"""tue-mps/pmt@54d73c9 decoder weights -> beit_mm ``PMT`` (pure functions).

The released files hold the decoder only (the encoder is the released DINOv3, frozen)::

    tue-mps/pmt (``network.`` optional)            beit_mm PMT
    bn.i.*                                         neck.bn.i.*
    decoder.lateral_projections.i.{0,2}.*          neck.lateral_projections.i.{0,2}.*
    decoder.scalers.i                              neck.scalers.i
    decoder.q.weight                               q.weight
    decoder.blocks.j.* (HF DINOv3 layer names)     decoder_blocks.j.* (as ``hf_dinov3_to_beit_mm``'s blocks)
    decoder.blocks.j.attention.qkv_proj.* (fused)  the same, split into q|k|v first
    decoder.{decoder_norm,upscale,mask_head,class_head}.*, decoder.attn_mask_probs  the same names, no ``decoder.``

Dropped: ``criterion.empty_weight`` (the loss config holds the no-object weight), ``encoder.*`` (pixel statistics,
and the encoder of a full file: it comes from its own converted DINOv3). ``rope.*`` (the DINOv2 variant) raises.
"""
from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from .dinov3 import _hf_layers

_RENAMES = (  # (tue-mps/pmt prefix, beit_mm prefix), first match wins
    ('bn.', 'neck.bn.'),
    ('decoder.lateral_projections.', 'neck.lateral_projections.'),
    ('decoder.scalers.', 'neck.scalers.'),
    ('decoder.', ''),
)


def pmt_to_beit_mm(state_dict: Mapping[str, Tensor], backbone: Mapping[str, Tensor] | None = None) -> dict[str, Tensor]:
    """A tue-mps/pmt PMT state dict (Lightning's ``network.``-prefixed or the bare network's) -> a beit_mm ``PMT`` one.

    Args:
        state_dict: the decoder-only release or a full state dict (its encoder is dropped).
        backbone: a converted beit_mm ``DINOv3`` state dict to put under ``backbone.``, or None for a decoder-only
            result (the model then reads its encoder from ``backbone.init_cfg``).
    Returns:
        beit_mm ``PMT`` weight names -> tensors.
    Raises:
        ValueError: not a PMT decoder, the DINOv2 variant (``rope.*``), or keys without a beit_mm counterpart.
    """
    sd = {k.replace('._orig_mod', ''): v for k, v in state_dict.items()}
    if any(k.startswith('network.') for k in sd):
        sd = {k[len('network.'):]: v for k, v in sd.items() if k.startswith('network.')}
    if 'decoder.q.weight' not in sd:
        raise ValueError('not a tue-mps/pmt PMT state dict (no [network.]decoder.q.weight); a DINOv3 encoder converts '
                         'with --model dinov3')
    if any(k.startswith('rope.') for k in sd):
        raise ValueError('the file is a PMT on DINOv2 (rope.* of its decoder); beit_mm\'s PMT reads a DINOv3 encoder')
    for key in [k for k in sd if k.startswith('encoder.')] + ['criterion.empty_weight']:
        sd.pop(key, None)
    for key in [k for k in sd if k.endswith('attention.qkv_proj.weight') or k.endswith('attention.qkv_proj.bias')]:
        for name, part in zip('qkv', sd.pop(key).chunk(3)):
            sd[key.replace('qkv_proj', f'{name}_proj')] = part
    out = _hf_layers(sd, 'decoder.blocks.', 'decoder_')
    for key in list(sd):
        for old, new in _RENAMES:
            if key.startswith(old):
                out[new + key[len(old):]] = sd.pop(key)
                break
    if sd:
        raise ValueError(f'{len(sd)} PMT keys have no beit_mm counterpart (first: {sorted(sd)[:5]})')
    if backbone is not None:
        out.update({'backbone.' + k: v for k, v in backbone.items()})
    return out
