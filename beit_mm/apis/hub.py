"""Write a beit_mm model as an HF transformers folder (:func:`save_hf`) or a timm state dict with its
``create_model`` arguments (:func:`save_timm`), atomically, and read an HF folder back (:func:`load_hf_state_dict`).
The HF model is built and loaded strictly first, so a folder is written only when HF holds every weight.
"""
from __future__ import annotations

import json
import os.path as osp

import torch
from mmpretrain.models.classifiers import ImageClassifier
from torch import Tensor, nn

from ..converters.beit import beit_to_hf, beit_to_timm, convert_beit
from ..converters.cvt import convert_cvt, cvt_to_hf
from ..converters.eomt import beit_mm_to_hf_eomt, hf_eomt_to_beit_mm
from ..converters.hf_config import (HFIncompatible, beit_hf_config, classification_hf_config, cvt_hf_config,
                                    eomt_hf_config, segmentation_hf_config)
from ..converters.upernet import segmentor_from_hf, segmentor_to_hf
from ..models.backbones.beit import BEiT
from ..models.backbones.cvt import CvT
from ..models.segmentors.eomt import EoMT
from ..fileio.outputs import atomic_dir, atomic_file



def model_parts(model: nn.Module) -> tuple[str, nn.Module]:
    """('segmentor' | 'classifier' | 'backbone', the backbone) of a built beit_mm/mmseg/mmpretrain model; a
    classifier is an mmpretrain ``ImageClassifier`` (or a subclass) with a neck and a head."""
    backbone = getattr(model, 'backbone', model)
    if hasattr(model, 'decode_head'):
        return 'segmentor', backbone
    if isinstance(model, ImageClassifier) and hasattr(model, 'head') and hasattr(model, 'neck'):
        return 'classifier', backbone
    return 'backbone', backbone


def _classifier_fc(model: nn.Module) -> dict[str, Tensor]:
    fc = getattr(model.head, 'fc', None)
    if not isinstance(fc, nn.Linear):
        raise HFIncompatible(f'the classifier head {type(model.head).__name__} has no Linear fc (mmpretrain '
                             'LinearClsHead)')
    return {'weight': fc.weight.detach(), 'bias': fc.bias.detach()}


def hf_model_and_state_dict(model: nn.Module, classes: list[str] | None = None,
                            part: str = 'auto') -> tuple[dict, dict[str, Tensor]]:
    """(HF config fields incl. ``architectures``, HF state dict) for ``model``; ``part='backbone'`` converts only its
    backbone. Raises :class:`beit_mm.converters.hf_config.HFIncompatible` when HF cannot hold it."""
    kind, backbone = model_parts(model)
    kind = 'backbone' if part == 'backbone' else kind
    bsd = {k: v.detach() for k, v in backbone.state_dict().items()}
    if isinstance(backbone, BEiT):
        if kind == 'segmentor' and isinstance(model, EoMT):
            cfg = eomt_hf_config(model, classes)  # first: names what HF cannot hold (a BEiT's relative bias, ...)
            sd = {k: v.detach() for k, v in model.state_dict().items()}
            hf_sd = beit_mm_to_hf_eomt(sd)
            hf_sd['criterion.empty_weight'] = model.criterion.class_weights.detach().clone()  # HF's loss buffer
            return cfg, hf_sd
        if kind == 'segmentor':
            sd = {k: v.detach() for k, v in model.state_dict().items()}
            return segmentation_hf_config(model, classes), segmentor_to_hf(sd)
        if kind == 'classifier':
            cfg = classification_hf_config(model, classes)
            bsd.update({f'fc_norm.{k}': v.detach() for k, v in model.neck.fc_norm.state_dict().items()})
            sd = beit_to_hf(bsd, prefix='beit.')
            sd.update({f'classifier.{k}': v for k, v in _classifier_fc(model).items()})
            return cfg, sd
        # no final norm (a segmentation backbone): HF's mean-pooling layout, whose only extra weight is the pooler's
        # fc_norm; load such a folder with BeitModel.from_pretrained(DIR, add_pooling_layer=False)
        cfg = beit_hf_config(backbone, use_mean_pooling=backbone.norm is None)
        cfg['architectures'] = ['BeitModel']
        return cfg, beit_to_hf(bsd)
    if isinstance(backbone, CvT):
        if kind == 'classifier':
            fc = _classifier_fc(model)
            bsd.update({f'head.{k}': v for k, v in fc.items()})
            return cvt_hf_config(backbone, fc['weight'].shape[0], classes), cvt_to_hf(bsd, with_classifier=True)
        if kind == 'segmentor':
            raise HFIncompatible('HF transformers has no CvT segmentation model; pass --part backbone for CvtModel')
        return cvt_hf_config(backbone), cvt_to_hf(bsd, with_classifier=False)
    raise HFIncompatible(f'no HF counterpart for a {type(backbone).__name__} backbone (BEiT and CvT only)')


def build_hf(cfg: dict, state_dict: dict[str, Tensor]) -> nn.Module:
    """The HF model of ``cfg['architectures'][0]`` with ``state_dict`` loaded strictly (RuntimeError otherwise)."""
    import transformers
    fields = dict(cfg)
    model_type = fields.pop('model_type')
    config_cls = transformers.BeitConfig if model_type == 'beit' else transformers.CvtConfig
    config = config_cls(**fields)
    arch = fields['architectures'][0]
    if arch == 'BeitModel' and config.use_mean_pooling and 'pooler.layernorm.weight' not in state_dict:
        hf_model = transformers.BeitModel(config, add_pooling_layer=False).eval()  # a backbone without fc_norm
    else:
        hf_model = getattr(transformers, arch)(config).eval()
    result = hf_model.load_state_dict(state_dict, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise RuntimeError(f'{type(hf_model).__name__} does not hold the converted weights: missing '
                           f'{result.missing_keys[:6]}, unexpected {result.unexpected_keys[:6]}')
    return hf_model


#: The writer named in an HF folder's manifest (:mod:`beit_mm.fileio.manifest`).
HF_WRITER = 'beit_mm.apis.hub.save_hf'


def save_hf(model: nn.Module, out_dir: str, classes: list[str] | None = None, part: str = 'auto') -> str:
    """Write ``model`` as an HF folder (``config.json``, ``model.safetensors`` and a manifest), replacing ``out_dir``
    as a whole and atomically; returns the HF class name.

    EoMT's folder is written directly: the transformers kept for mmpretrain has no ``EomtForUniversalSegmentation``."""
    cfg, state_dict = hf_model_and_state_dict(model, classes, part)
    if cfg['model_type'] == 'eomt':
        from safetensors.torch import save_file
        with atomic_dir(out_dir, written_by=HF_WRITER) as tmp:
            with open(osp.join(tmp, 'config.json'), 'w') as f:
                json.dump(dict(cfg, torch_dtype='float32'), f, indent=2, sort_keys=True)
            save_file({k: v.contiguous() for k, v in state_dict.items()}, osp.join(tmp, 'model.safetensors'),
                      metadata={'format': 'pt'})
        return cfg['architectures'][0]
    hf_model = build_hf(cfg, state_dict)
    with atomic_dir(out_dir, written_by=HF_WRITER) as tmp:
        hf_model.save_pretrained(tmp)
    return type(hf_model).__name__


def load_hf_state_dict(folder: str) -> dict[str, Tensor]:
    """An HF folder written by :func:`save_hf` -> beit_mm names: a segmentor's full state dict (``backbone.*``,
    ``neck.*``, heads), or a backbone's (plus ``fc_norm.*``/``head.*`` of a classifier, under those names)."""
    from ..fileio.checkpoint import load_safetensors
    from ..fileio.json_file import read_json
    config = read_json(osp.join(folder, 'config.json'))
    sd = load_safetensors(osp.join(folder, 'model.safetensors'))
    arch = config['architectures'][0]
    if arch == 'BeitForSemanticSegmentation':
        return segmentor_from_hf(sd)
    if arch == 'EomtForUniversalSegmentation':
        return hf_eomt_to_beit_mm(sd)
    if config['model_type'] == 'beit':
        return convert_beit(sd, 'hf', expand_shared_bias=False, keep_mim_head=True, keep_head=True)
    return convert_cvt(sd, 'hf')


# ---------------------------------------------------------------------------------------------------------------- timm
TIMM_ARCHS = {(768, 12, 12): 'base', (1024, 24, 16): 'large'}


def timm_arguments(model: nn.Module, file: str, beit_v2: bool = False) -> dict:
    """``timm.create_model`` arguments that build a timm ``Beit`` equal to ``model``'s BEiT (+ classifier)."""
    kind, backbone = model_parts(model)
    if not isinstance(backbone, BEiT):
        raise HFIncompatible(f'timm export covers BEiT (timm beit_*/beitv2_*), not {type(backbone).__name__}')
    if backbone.num_prefix_tokens > 1 or backbone.no_embed_class:
        raise HFIncompatible('timm Beit has no register tokens and a cls row in its position embedding; this is a '
                             'DINOv2-style BEiT (an EoMT backbone: --to hf writes EomtForUniversalSegmentation)')
    block = backbone.blocks[0]
    if kind == 'classifier':
        num_classes, global_pool = model.head.fc.out_features, 'avg'  # fc_norm after mean pooling
    elif backbone.norm is not None:
        num_classes, global_pool = 0, 'token'  # a final norm on all tokens (MIM backbones)
    else:
        raise HFIncompatible('timm Beit always has a final norm or a mean-pooling fc_norm; this backbone has neither '
                             '(a segmentation backbone): timm cannot hold it')
    size = TIMM_ARCHS.get((backbone.embed_dims, backbone.num_layers, backbone.num_heads), 'base')
    name = f'beit{"v2" if beit_v2 else ""}_{size}_patch16_224'
    kwargs = dict(img_size=[backbone.grid[0] * backbone.patch_size, backbone.grid[1] * backbone.patch_size],
                  patch_size=backbone.patch_size, embed_dim=backbone.embed_dims, depth=backbone.num_layers,
                  num_heads=backbone.num_heads, mlp_ratio=block.mlp.fc1.out_features / backbone.embed_dims,
                  use_abs_pos_emb=backbone.pos_embed is not None,
                  use_rel_pos_bias=block.attn.relative_position_bias_table is not None,
                  use_shared_rel_pos_bias=backbone.rel_pos_bias is not None,
                  init_values=backbone.layer_scale_init_value if block.gamma_1 is not None else None,
                  global_pool=global_pool, num_classes=num_classes)
    return dict(model_name=name, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=num_classes),
                **kwargs)


def timm_json_path(out_file: str) -> str:
    """Where :func:`save_timm` writes the ``create_model`` arguments of ``out_file``: ``NAME.json`` next to it."""
    return osp.splitext(out_file)[0] + '.json'


def save_timm(model: nn.Module, out_file: str, beit_v2: bool = False) -> dict:
    """Write ``model``'s BEiT (+ ``fc_norm``/``head`` of a classifier) as a timm state dict file and its
    ``create_model`` arguments next to it (:func:`timm_json_path`), each atomically; returns those arguments."""
    kind, backbone = model_parts(model)
    args = timm_arguments(model, osp.abspath(out_file), beit_v2)
    sd = {k: v.detach() for k, v in backbone.state_dict().items()}
    if kind == 'classifier':
        sd.update({f'fc_norm.{k}': v.detach() for k, v in model.neck.fc_norm.state_dict().items()})
        sd.update({f'head.{k}': v for k, v in _classifier_fc(model).items()})
    with atomic_file(out_file) as tmp:
        torch.save(beit_to_timm(sd), tmp)
    with atomic_file(timm_json_path(out_file)) as tmp, open(tmp, 'w') as f:
        json.dump(args, f, indent=2)
    return args
