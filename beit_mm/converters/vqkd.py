"""VQ-KD tokenizers (unilm BEiT v2, mmpretrain 1.2) and their DINO teacher -> beit_mm names.

Only the ViTs' final ``fc_norm`` becomes ``norm`` and the never-read quantizer buffers go; ``mmpretrain`` files hold
no decoder (load into ``VQKD(with_decoder=False)``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

from .beit import _from_openmmlab, _rename

SOURCES = ('unilm', 'mmpretrain')
# unilm beit2/modeling_vqkd.py vqkd_encoder_base_decoder_*: keys dropped when loading as a tokenizer
DROPPED_PREFIXES = ('teacher_model.', 'scaling_layer.', 'loss')
UNUSED_QUANTIZER_KEYS = ('quantize.embedding.cluster_size', 'quantize.embedding.embed_avg')

KNOWN_KEY = re.compile(
    r'^((encoder|decoder)\.(cls_token|pos_embed|patch_embed\.proj\.(weight|bias)|norm\.(weight|bias)|'
    r'blocks\.\d+\.(norm1|norm2|attn\.proj|mlp\.fc1|mlp\.fc2)\.(weight|bias)|blocks\.\d+\.attn\.(qkv\.weight|q_bias|'
    r'v_bias))|(encode|decode)_task_layer\.[02]\.(weight|bias)|quantize\.(embedding\.(weight|initted)|cluster_size))$')


def _sub_dict(sd: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


def convert_vqkd(state_dict: Mapping[str, Tensor], source: str) -> dict[str, Tensor]:
    """A unilm or mmpretrain VQ-KD state dict -> a beit_mm ``VQKD`` one.

    Raises:
        ValueError: unknown source, or keys that are not VQ-KD keys after the conversion.
    """
    if source not in SOURCES:
        raise ValueError(f'unknown VQ-KD checkpoint source {source!r}; choose one of {SOURCES}')
    sd = {k: v for k, v in state_dict.items() if not k.startswith(DROPPED_PREFIXES) and k not in UNUSED_QUANTIZER_KEYS}
    if source == 'unilm':
        sd = _rename(sd, [(r'^(encoder|decoder)\.fc_norm\.', r'\1.norm.')])
        sd = {k: v for k, v in sd.items() if not re.match(r'^(encoder|decoder)\.head\.', k)}
    else:
        enc = {f'encoder.{k}': v for k, v in _from_openmmlab(_sub_dict(sd, 'encoder.'), 'ln1', None).items()}
        sd = {**{k: v for k, v in sd.items() if not k.startswith('encoder.')}, **enc}
    bad = [k for k in sd if not KNOWN_KEY.match(k)]
    if bad or 'quantize.embedding.weight' not in sd or 'encoder.patch_embed.proj.weight' not in sd:
        hint = ('it looks like --source mmpretrain' if any('.layers.0.ln1' in k for k in sd) and source != 'mmpretrain'
                else 'it looks like --source unilm' if any('.fc_norm.' in k for k in bad) else
                'is it a VQ-KD tokenizer checkpoint (keys encoder.*, quantize.embedding.weight)?')
        raise ValueError(f'{len(bad)} keys are not VQ-KD keys after --source {source} conversion (first: {bad[:5]}); '
                         f'{hint}')
    return sd


def convert_dino_vit(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """DINO's ViT (``facebookresearch/dino``; timm's names too) -> beit_mm ``BEiT(use_abs_pos_emb=True,
    use_rel_pos_bias=False, layer_scale_init_value=0, final_norm=True)``.

    ``attn.qkv.bias`` becomes ``q_bias``/``v_bias`` (the softmax cancels the key bias); ``head.*`` is dropped.
    """
    out = {}
    for k, v in state_dict.items():
        if k.startswith('head.'):
            continue
        if k.endswith('.attn.qkv.bias'):
            q, _, vb = v.chunk(3)
            base = k[:-len('qkv.bias')]
            out[base + 'q_bias'], out[base + 'v_bias'] = q, vb
        else:
            out[k] = v
    return out


