"""Checkpoint conversion, the one dispatch over :mod:`beit_mm.converters`.

An official or foreign checkpoint becomes a beit_mm file ``{'state_dict': ...}`` (:data:`CONVERTERS`, model ->
source -> converter), or a beit_mm training checkpoint becomes an HF folder or a timm state dict (``to='hf'|'timm'``,
the model built from ``config``). Outputs are checked first and written atomically. Files are read with
``torch.load(weights_only=True)``, except the two sources that run code the file carries, trusted by name: the
official DALL-E ``encoder.pkl`` and OpenAI's TorchScript CLIP (``trust_code=True``).
"""
from __future__ import annotations

import os.path as osp
from dataclasses import dataclass
from typing import Callable

import torch

from ..converters import beit as beit_conv
from ..converters.layouts import MODELS
from ..fileio import CheckpointFileError, load_state_dict_file
from ..fileio.manifest import file_sha256
from ..models.builder import CheckpointMismatchError


class ConversionError(Exception):
    """A refusal of :func:`convert_checkpoint`: the message names the file, the problem and the fix."""


class ConversionUsageError(ConversionError):
    """Options that do not go together (``--model``/``--source`` missing or not matching): the tool reports it as a
    usage error (exit status 2)."""


@dataclass(frozen=True)
class _Options:
    img_size: int | None
    patch_size: int
    trust_code: bool
    keep_mim_head: bool
    keep_head: bool
    drop_class_head: bool
    keep_shared_rel_pos_bias: bool
    class_order: str | None = None


def class_orders() -> dict[str, tuple[int, ...]]:
    """``--class-order`` name -> the source's class index of each beit_mm label (EoMT class heads)."""
    from ..data.datasets.ade20k_panoptic import OFFICIAL_ORDER
    return {'ade20k-panoptic': OFFICIAL_ORDER}


def read_source(path: str, model: str, source: str, trust_code: bool = False) -> dict:
    """The state dict of ``path`` as the source layout stores it (CLIP: OpenAI names; DALL-E openai: the unpickled
    encoder's)."""
    if not osp.isdir(path):  # a FIFO or a device: named before any reader opens it (and waits forever)
        from ..fileio.inputs import check_regular_file
        check_regular_file(path, 'checkpoint')
    if model == 'clip':  # OpenAI's TorchScript file (trusted by name) or an HF folder -> OpenAI names
        from ..models.tokenizers.teachers import load_clip_state_dict
        return load_clip_state_dict(path, trust_code=trust_code)
    if model == 'dalle' and source == 'openai':
        from ..converters.dalle import load_openai_encoder
        return load_openai_encoder(path)
    if path.endswith('.safetensors'):
        from ..fileio.checkpoint import load_safetensors
        return load_safetensors(path)
    return load_state_dict_file(path)


def _no_img_size(model: str, opts: _Options) -> None:
    if opts.img_size is not None:
        raise ConversionError(f'--img-size applies to --model beit and dinov2 only, not {model}')


def _vit_adapter(path: str, source: str, opts: _Options) -> dict:
    """czczup/ViT-Adapter BEiT segmentor -> BEiTAdapter (+ UPerNet heads, class meta): the whole file."""
    from ..converters.vit_adapter import convert_vit_adapter_checkpoint
    from ..fileio.checkpoint import open_checkpoint
    if opts.img_size is not None:
        raise ConversionError('--img-size applies to --model beit and dinov2 only, not vit_adapter')
    return convert_vit_adapter_checkpoint(open_checkpoint(path), keep_heads=opts.keep_head)


def _clip(path: str, source: str, opts: _Options) -> dict:
    src = read_source(path, 'clip', source, opts.trust_code)
    return {k: v for k, v in src.items() if k.startswith('visual.')}  # the vision tower, as CLIPTeacher loads it


def _beit(path: str, source: str, opts: _Options) -> dict:
    src = read_source(path, 'beit', source, opts.trust_code)
    return beit_conv.convert_beit(
        src, source, img_size=opts.img_size, patch_size=opts.patch_size,
        expand_shared_bias=not opts.keep_shared_rel_pos_bias, keep_mim_head=opts.keep_mim_head,
        keep_head=opts.keep_head)


def _dinov2(path: str, source: str, opts: _Options) -> dict:
    """timm DINOv2 with registers, patch embedding and positions resampled (EoMT's start)."""
    from ..converters.dinov2 import convert_dinov2
    src = read_source(path, 'dinov2', source, opts.trust_code)
    if opts.img_size is None:
        raise ConversionError('--model dinov2 needs --img-size (and --patch-size, default 16): the grid the position '
                              'embedding and patch embedding are resampled to, e.g. --img-size 512 for EoMT ADE20K')
    return convert_dinov2(src, opts.img_size, opts.patch_size)


def _dinov3(path: str, source: str, opts: _Options) -> dict:
    """facebookresearch/dinov3 or transformers DINOv3ViTModel -> beit_mm.DINOv3 (RoPE: no grid to resample), with the
    settings the source declares in ``meta['dinov3']``."""
    from ..converters.dinov3 import hf_dinov3_to_beit_mm, official_dinov3_settings, official_dinov3_to_beit_mm
    src = read_source(path, 'dinov3', source, opts.trust_code)
    _no_img_size('dinov3', opts)
    if source == 'official':
        return {'state_dict': official_dinov3_to_beit_mm(src), 'meta': {'dinov3': official_dinov3_settings(src)}}
    out = hf_dinov3_to_beit_mm(src)
    return {'state_dict': out, 'meta': {'dinov3': hf_config_settings(path, out)}}


def hf_config_settings(path: str, converted: dict, prefix: str = '') -> dict:
    """The DINOv3 settings of the HF ``config.json`` beside the weights ``path``
    (:func:`beit_mm.converters.dinov3.hf_dinov3_settings`), checked against the ``converted`` state dict (the
    DINOv3's keys under ``prefix``).

    Raises:
        ConversionError: no ``config.json`` there (the weights do not show the RoPE base, the norm eps or the head
            count), one beit_mm's DINOv3 cannot follow, or one of another model.
    """
    from ..converters.dinov3 import check_settings_fit_weights, hf_dinov3_settings
    from ..fileio.json_file import read_json
    from ..fileio.names import shown
    config = osp.join(osp.dirname(osp.abspath(path)), 'config.json')
    if not osp.isfile(config):
        raise ConversionError(f'{shown(path)}: no config.json beside it. An HF DINOv3 file\'s weights do not show its '
                              'rope_theta, layer_norm_eps or num_attention_heads, so beit_mm converts it only with its '
                              'config. Fix: put the config.json of the same HF repository next to the weights')
    try:
        settings = hf_dinov3_settings(read_json(config), config)
        check_settings_fit_weights(settings, converted, config, prefix)
        return settings
    except ValueError as error:  # JSONFileError among them
        raise ConversionError(f'{error}. Nothing was written') from None


def _cvt(path: str, source: str, opts: _Options) -> dict:
    from ..converters.cvt import convert_cvt
    src = read_source(path, 'cvt', source, opts.trust_code)
    _no_img_size('cvt', opts)
    out = convert_cvt(src, source)
    return out if opts.keep_head else {k: v for k, v in out.items() if not k.startswith('head.')}


def _vqkd(path: str, source: str, opts: _Options) -> dict:
    """The tokenizer without its teacher; mmpretrain files have no decoder."""
    from ..converters.vqkd import convert_vqkd
    src = read_source(path, 'vqkd', source, opts.trust_code)
    _no_img_size('vqkd', opts)
    return convert_vqkd(src, source)


def _eomt(path: str, source: str, opts: _Options) -> dict:
    """HF EomtForUniversalSegmentation -> beit_mm.EoMT on a DINOv2-style BEiT, HF EomtDinov3ForUniversalSegmentation
    -> beit_mm.EoMT on a DINOv3 (told apart by their keys, the DINOv3's settings in ``meta['dinov3']``); or
    beit_mm's own (checked)."""
    from ..converters.dinov3 import hf_eomt_dinov3_to_beit_mm, is_hf_eomt_dinov3
    from ..converters.eomt import check_beit_mm_eomt, drop_class_head, hf_eomt_to_beit_mm, reorder_classes
    src = read_source(path, 'eomt', source, opts.trust_code)
    _no_img_size('eomt', opts)
    meta = {}
    if source == 'hf' and is_hf_eomt_dinov3(src):
        out = hf_eomt_dinov3_to_beit_mm(src)
        meta = {'dinov3': hf_config_settings(path, out, 'backbone.')}
    elif source == 'hf':
        out = hf_eomt_to_beit_mm(src)
    else:
        out = check_beit_mm_eomt(src)
    if opts.class_order is not None:
        out = reorder_classes(out, class_orders()[opts.class_order])
    out = drop_class_head(out) if opts.drop_class_head else out
    return {'state_dict': out, 'meta': meta} if meta else {'state_dict': out}


def _pmt(path: str, source: str, opts: _Options) -> dict:
    """tue-mps/pmt decoder weights -> beit_mm.PMT's decoder (the encoder is its own converted DINOv3)."""
    from ..converters.pmt import pmt_to_beit_mm
    src = read_source(path, 'pmt', source, opts.trust_code)
    _no_img_size('pmt', opts)
    return pmt_to_beit_mm(src)


def _dino(path: str, source: str, opts: _Options) -> dict:
    """DINO ViT -> beit_mm BEiT (a VQ-KD teacher: beit_mm.BackboneTeacher)."""
    from ..converters.vqkd import convert_dino_vit
    src = read_source(path, 'dino', source, opts.trust_code)
    _no_img_size('dino', opts)
    return convert_dino_vit(src)


def _dalle(path: str, source: str, opts: _Options) -> dict:
    src = read_source(path, 'dalle', source, opts.trust_code)
    _no_img_size('dalle', opts)
    if source == 'dvae':  # the encoder of a dVAE trained with configs/dvae/
        from ..converters.dvae import extract_dvae_encoder
        return extract_dvae_encoder(src)
    from ..converters.dalle import convert_dalle
    return convert_dalle(src, source)


Converter = Callable[[str, str, _Options], dict]

_BY_MODEL: dict[str, Converter] = {
    'beit': _beit, 'cvt': _cvt, 'dalle': _dalle, 'clip': _clip, 'vqkd': _vqkd, 'dino': _dino, 'eomt': _eomt,
    'dinov2': _dinov2, 'dinov3': _dinov3, 'vit_adapter': _vit_adapter, 'pmt': _pmt}
#: model -> source layout -> converter (a state dict; vit_adapter: the whole file with the source's class meta).
CONVERTERS: dict[str, dict[str, Converter]] = {
    model: {source: _BY_MODEL[model] for source in sources} for model, sources in MODELS.items()}
#: models whose converter returns the whole file (``state_dict`` and meta), not a bare state dict.
WHOLE_FILE_MODELS = ('vit_adapter', 'dinov3', 'eomt')


def describe_source(path: str) -> str:
    """'; the file looks like <kind>' from its keys, or '' when that cannot be told (never raises)."""
    from ..fileio.checkpoint import checkpoint_kind
    try:
        kind = checkpoint_kind(load_state_dict_file(path))
    except Exception:  # noqa: BLE001  (only a hint for the message)
        return ''
    return f'; the file looks like {kind}' if kind else ''


def read_checkpoint_for_export(path: str, config: str | None):
    """``to``: the checkpoint's weights and meta, and ``config`` (required: the config source a checkpoint stores is
    Python code, which beit_mm never runs; :mod:`beit_mm.apis.checkpoint`)."""
    from mmengine.config import Config

    from ..fileio import open_checkpoint, unwrap_state_dict
    if not config:
        raise ConversionError(f'--to needs --config CONFIG, the config {path} was trained with. beit_mm does not build '
                              'a model from the config stored inside a checkpoint: that is Python code from whoever '
                              'made the file, and loading must not run it. Nothing was written')
    checkpoint = open_checkpoint(path)
    return unwrap_state_dict(checkpoint), checkpoint.get('meta') or {}, Config.fromfile(config)


def export_checkpoint(src: str, dst: str, *, to: str, config: str | None, overwrite: bool = False,
                      part: str = 'auto', beitv2: bool = False) -> str:
    """``to='hf'|'timm'``: build ``config``'s model, load the checkpoint strictly, write the HF folder / timm file."""
    import beit_mm  # noqa: F401  (registrations)
    from ..converters.hf_config import HFIncompatible
    from ..fileio.outputs import check_output
    from ..models.builder import check_weights_match
    from .hub import save_hf, save_timm, timm_json_path
    from ..models.builder import build_from_config, resolve_checkpoint
    path = resolve_checkpoint(src)
    inputs = [path, config]
    check_output(dst, overwrite, kind='folder' if to == 'hf' else 'file', inputs=inputs)
    if to == 'timm':
        check_output(timm_json_path(dst), overwrite, inputs=inputs)
    state_dict, meta, cfg = read_checkpoint_for_export(path, config)
    model = build_from_config(cfg)
    check_weights_match(model, state_dict, f'{path} (with --config {config})')
    model.load_state_dict(state_dict, strict=True)
    classes = list((meta.get('dataset_meta') or {}).get('classes') or []) or None
    try:
        if to == 'hf':
            hf_class = save_hf(model, dst, classes=classes, part=part)
        else:
            kwargs = save_timm(model, dst, beit_v2=beitv2)
    except HFIncompatible as error:
        raise ConversionError(f'{path}: {error}. Nothing was written (docs/export.md lists what HF and timm can hold; '
                              '--part backbone converts only the backbone)') from None
    if to == 'hf':
        print(f'wrote {dst}: {hf_class} (config.json, model.safetensors) from {path}')
    else:
        print(f'wrote {dst} and {timm_json_path(dst)}: timm.create_model(**json.load(open(...))) builds '
              f'{kwargs["model_name"]} with these weights')
    return dst


def check_dinov3_config(declared: dict, src: str, config: str) -> None:
    """Raise unless the DINOv3 of ``config`` (its model or its model's backbone) has the ``declared`` settings."""
    from mmengine.config import Config

    from ..fileio.names import shown
    from ..models.backbones.dinov3 import check_settings, config_settings
    model = Config.fromfile(config).model
    backbone, where = (model, 'model') if 'DINOv3' in str(model.get('type')) else (model.get('backbone') or {},
                                                                                   'model.backbone')
    if 'DINOv3' not in str(backbone.get('type')):
        raise ConversionError(f'--config {shown(config)} builds no DINOv3 (model.type {model.get("type")!r}, '
                              f'model.backbone.type {backbone.get("type")!r}). Fix: pass the config that will load '
                              f'{shown(src)}\'s conversion')
    try:
        check_settings(declared, config_settings(backbone), src, f'--config {shown(config)}', f'{where} of that config')
    except ValueError as error:
        raise ConversionError(f'{error}. Nothing was written') from None


def _convert_to_beit_mm(src: str, dst: str, model: str | None, source: str | None, overwrite: bool,
                        opts: _Options, config: str | None = None) -> str:
    from ..fileio.outputs import atomic_file, check_output
    if model is None or source is None:
        raise ConversionUsageError('--model and --source are required (or --to hf|timm for the other way)')
    if model not in CONVERTERS:
        raise ConversionUsageError(f'--model {model} is not known; choose one of {sorted(CONVERTERS)}')
    if source not in CONVERTERS[model]:
        raise ConversionUsageError(f'--source {source} is not a {model} layout; choose one of {MODELS[model]}')
    if not osp.lexists(src):  # an official file not downloaded yet: where it is published, the exact command
        from .pretrained import missing_official_file
        message = missing_official_file(src)
        if message is not None:
            raise ConversionError(message)
    check_output(dst, overwrite, inputs=[src])
    if opts.drop_class_head and model != 'eomt':
        raise ConversionError(f'--drop-class-head applies to --model eomt only, not {model} (BEiT/CvT files keep '
                              'their classifier only with --keep-head)')
    if opts.class_order is not None and (model != 'eomt' or opts.class_order not in class_orders()
                                         or opts.drop_class_head):
        raise ConversionUsageError(f'--class-order {opts.class_order} applies to --model eomt with its class head, '
                                   f'one of {sorted(class_orders())} (not with --drop-class-head)')
    converted = CONVERTERS[model][source](src, source, opts)
    checkpoint = converted if model in WHOLE_FILE_MODELS else {'state_dict': converted}
    state_dict = checkpoint['state_dict']
    declared = (checkpoint.get('meta') or {}).get('dinov3')
    if config is not None and declared is not None:
        check_dinov3_config(declared, src, config)
    with atomic_file(dst) as tmp:
        torch.save(checkpoint, tmp)
    digest = file_sha256(dst)
    print(f'wrote {len(state_dict)} tensors ({sum(v.numel() for v in state_dict.values()) / 1e6:.2f}M values) to '
          f'{dst} (sha256 {digest[:16]})')
    if declared is not None:
        told = ', '.join(f'{k}={v!r}' for k, v in declared.items())
        print(f'the source declares the DINOv3 settings {told}; stored in meta["dinov3"], checked when a DINOv3 '
              'loads the file (build the backbone with them)')
    return dst


def convert_checkpoint(src: str, dst: str, *, model=None, source=None, img_size=None, patch_size=16, trust_code=False,
                       keep_mim_head=False, keep_head=False, drop_class_head=False, keep_shared_rel_pos_bias=False,
                       class_order=None, to=None, config=None, overwrite=False, part='auto', beitv2=False) -> str:
    """Convert ``src`` into ``dst`` and return ``dst``: ``model``/``source`` (a layout of :data:`MODELS`) -> a beit_mm
    file ``{'state_dict': ...}``; or ``to='hf'|'timm'`` with ``config`` -> an HF folder / a timm file. The keywords
    are the conversion entry point's flags.

    Raises:
        ConversionError: a refusal, nothing written; :class:`ConversionUsageError` for flags that do not go together.
    """
    from ..fileio.outputs import OutputError
    opts = _Options(img_size=img_size, patch_size=patch_size, trust_code=trust_code, keep_mim_head=keep_mim_head,
                    keep_head=keep_head, drop_class_head=drop_class_head,
                    keep_shared_rel_pos_bias=keep_shared_rel_pos_bias, class_order=class_order)
    try:
        if to is not None:
            return export_checkpoint(src, dst, to=to, config=config, overwrite=overwrite, part=part, beitv2=beitv2)
        return _convert_to_beit_mm(src, dst, model, source, overwrite, opts, config)
    except ConversionError:
        raise
    except (OutputError, FileNotFoundError, CheckpointFileError, CheckpointMismatchError) as error:
        raise ConversionError(str(error)) from error
    except (ValueError, KeyError) as error:  # a converter meeting keys or shapes of another layout
        if to is not None:
            raise ConversionError(f'{src} (with --config {config}) cannot be written --to {to}: '
                                  f'{type(error).__name__}: {error}. Nothing was written (docs/export.md lists what '
                                  'HF and timm can hold; --part backbone converts only the backbone)') from None
        raise ConversionError(f'{src} cannot be converted as --model {model} --source {source}: {error}'
                              f'{describe_source(src)}. Fix: choose the --model/--source of the file\'s origin '
                              '(tools/convert_checkpoint.py --help lists them; docs/checkpoints.md)') from None
