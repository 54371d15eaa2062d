"""Build a config's model and check a checkpoint against it (as timm's ``_builder.py``/``_helpers.py``)."""
from __future__ import annotations

import os.path as osp
from collections.abc import Mapping

import torch
from mmengine.config import Config, ConfigDict
from mmengine.registry import init_default_scope
from mmpretrain.models.classifiers import ImageClassifier
from mmseg.models.segmentors import BaseSegmentor, EncoderDecoder
from torch import Tensor, nn

from ..fileio.checkpoint import checkpoint_kind, load_state_dict_file
from ..fileio.inputs import check_regular_file
from ..fileio.work_dir import read_last_checkpoint


class CheckpointMismatchError(ValueError):
    """A checkpoint's weights do not fit the model it is loaded into; the message lists the keys and shapes."""


def drop_pretrained_init(node) -> None:
    """Set every ``init_cfg`` of type ``Pretrained`` and every string ``pretrained`` path under ``node`` (a config
    dict/list) to None, in place; a boolean ``pretrained`` is kept."""
    if isinstance(node, dict):
        init_cfg = node.get('init_cfg')
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            node['init_cfg'] = None
        if isinstance(node.get('pretrained'), str):
            node['pretrained'] = None
        for value in node.values():
            drop_pretrained_init(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            drop_pretrained_init(value)


ENCODER_DECODER_INFERENCE_WEIGHTS = ('backbone.', 'neck.', 'decode_head.')
CLASSIFIER_INFERENCE_WEIGHTS = ('backbone.', 'neck.', 'head.')
FOREIGN_INFERENCE_WEIGHTS = ((EncoderDecoder, ENCODER_DECODER_INFERENCE_WEIGHTS),
                             (ImageClassifier, CLASSIFIER_INFERENCE_WEIGHTS))


def model_class(cfg: Config) -> type:
    """The class ``cfg.model`` builds, looked up as ``MODELS.build`` does (``default_scope``, else ``'mmseg'``).

    Raises:
        KeyError: nothing is registered under the model's ``type``.
    """
    from mmengine.registry import MODELS
    model_type = cfg.model.get('type')
    if isinstance(model_type, type):
        return model_type
    scope = cfg.get('default_scope', 'mmseg')
    with MODELS.switch_scope_and_registry(scope) as registry:
        cls = registry.get(model_type) if isinstance(model_type, str) else None
    if cls is None:
        raise KeyError(f'{cfg.filename or "the config"}: model type {model_type!r} is registered nowhere in scope '
                       f'{scope!r}. Fix: spell it with its scope (\'beit_mm.EoMT\', \'mmpretrain.ImageClassifier\') or '
                       "import its package (custom_imports=dict(imports=['beit_mm'], allow_failed_imports=False))")
    return cls


def is_segmentor_config(cfg: Config) -> bool:
    """True when the config's model is an mmseg ``BaseSegmentor`` (``EncoderDecoder``, ``beit_mm.EoMT``, subclasses)."""
    return issubclass(model_class(cfg), BaseSegmentor)


def declared_inference_weights(cls: type) -> tuple[str, ...]:
    """The weight-name prefixes inference reads in a ``cls`` model: its ``inference_weights``, else its foreign base
    class's (:data:`FOREIGN_INFERENCE_WEIGHTS`), else every weight (``''``)."""
    declared = getattr(cls, 'inference_weights', None)
    if declared is not None:
        return tuple(declared)
    for base, weights in FOREIGN_INFERENCE_WEIGHTS:
        if issubclass(cls, base):
            return weights
    return ('', )


def inference_weights(cfg: Config) -> tuple[str, ...]:
    """:func:`declared_inference_weights` of the config's :func:`model_class`."""
    return declared_inference_weights(model_class(cfg))


segmentor_inference_weights = inference_weights


def resolve_checkpoint(path: str) -> str:
    """``path`` when it is a checkpoint file, or the ``last_checkpoint`` of the work dir ``path``.

    Raises:
        FileNotFoundError: no such file, or a folder without a ``last_checkpoint``.
    """
    if osp.isdir(path):
        latest, why = read_last_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f'{why or f"{path} is a folder without a last_checkpoint file"}. Fix: pass a .pth '
                                    'file or the work dir of a tools/train.py run')
        return latest
    if not osp.exists(path) and not osp.islink(path):
        raise FileNotFoundError(f'checkpoint {path} does not exist; pass a .pth file or a work dir')
    check_regular_file(path, 'checkpoint')  # a FIFO or a device: named, never opened for reading
    return path


def build_from_config(cfg: Config, drop_auxiliary_head: bool = False) -> nn.Module:
    """The config's model with its own random init and no ``Pretrained`` file read, in eval mode, SyncBN as BN."""
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import MODELS
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    model_cfg = cfg.model.to_dict() if hasattr(cfg.model, 'to_dict') else dict(cfg.model)
    drop_pretrained_init(model_cfg)
    if drop_auxiliary_head and model_cfg.get('auxiliary_head') is not None:
        model_cfg['auxiliary_head'] = None
    model = MODELS.build(ConfigDict(model_cfg))  # mmdet's heads read nested configs as attributes
    model.init_weights()
    return revert_sync_batchnorm(model).eval()


def _describe_keys(keys: list[str], limit: int = 5) -> str:
    return f'{len(keys)} ({", ".join(keys[:limit])}{", ..." if len(keys) > limit else ""})'


def _bad_values(own: Mapping[str, Tensor], state_dict: Mapping[str, Tensor]) -> tuple[list[str], list[str]]:
    """``(non-float, non-finite)`` file weights among those matching a float model tensor in name and shape."""
    non_float, non_finite = [], []
    for key, value in state_dict.items():
        target = own.get(key)
        if not isinstance(value, Tensor) or target is None or not target.is_floating_point():
            continue
        if tuple(value.shape) != tuple(target.shape):
            continue
        if not value.is_floating_point():
            non_float.append(f'{key} ({str(value.dtype).replace("torch.", "")})')
        elif not bool(torch.isfinite(value).all()):
            non_finite.append(f'{key} ({int((~torch.isfinite(value)).sum())} of {value.numel()} values)')
    return non_float, non_finite


def check_weights_match(model: nn.Module, state_dict: Mapping[str, Tensor], source: str, strict: bool = True,
                        may_lack: tuple[str, ...] = ()) -> None:
    """Check that ``state_dict`` fits ``model`` before loading it.

    Args:
        source: the file, for messages.
        strict: also refuse missing and unexpected keys.
        may_lack: model weight prefixes the file may lack under ``strict``.

    Raises:
        CheckpointMismatchError: other shapes, non-float or non-finite values, or (``strict``) missing/unexpected keys.
    """
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict and not (may_lack and k.startswith(may_lack))]
    unexpected = [k for k in state_dict if k not in own]
    wrong = [f'{k} {tuple(state_dict[k].shape)} vs {tuple(own[k].shape)}' for k in own
             if k in state_dict and tuple(getattr(state_dict[k], 'shape', ())) != tuple(own[k].shape)]
    non_float, non_finite = _bad_values(own, state_dict)
    if not wrong and not non_float and not non_finite and not (strict and (missing or unexpected)):
        return
    kind = checkpoint_kind(state_dict) or 'an unknown model'
    parts = [f'{source} does not fit the model ({type(model).__name__}, {len(own)} weights); the file looks like '
             f'{kind}:']
    if wrong:
        parts.append(f'shapes differ for {_describe_keys(wrong, 3)} (file vs model)')
    if non_float:
        parts.append(f'weights that are not floating point where the model holds floats: {_describe_keys(non_float, 3)}'
                     ' (a quantized or corrupted file; loading would cast them silently)')
    if non_finite:
        parts.append(f'weights holding NaN or inf: {_describe_keys(non_finite, 3)} (a diverged run or a corrupted '
                     'file)')
    mismatch = bool(wrong) or strict and bool(missing or unexpected)
    if mismatch and missing:
        parts.append(f'model weights missing from the file: {_describe_keys(missing)}')
    if mismatch and unexpected:
        parts.append(f'file weights the model lacks: {_describe_keys(unexpected)}')
    fixes = []
    class_set = getattr(model, 'class_set_weights', ())
    if wrong and class_set and all(w.startswith(class_set) for w in wrong):
        fixes.append(f'the file was trained on another class set ({", ".join(class_set)} differ); to fine-tune on this '
                     'config\'s classes, drop them: tools/convert_checkpoint.py --model eomt --source beit_mm (or hf) '
                     '--drop-class-head SRC DST, then load_from=DST')
    if mismatch:
        fixes.append('pass the config this checkpoint was trained with; official or other-toolkit weights go through '
                     'tools/convert_checkpoint.py --model ... --source ... first (docs/checkpoints.md)')
    if non_float or non_finite:
        fixes.append('pass a float checkpoint with finite weights (for a diverged run, an earlier checkpoint of it)')
    parts.append('Fix: ' + '; '.join(fixes))
    raise CheckpointMismatchError(' '.join(parts))


def check_loaded_weights(model: nn.Module, path: str, need: tuple[str, ...], source: str,
                         state_dict: dict | None = None) -> dict:
    """Check that the checkpoint ``path`` (``state_dict`` when read already) fits ``model`` for inference, every
    weight under the ``need`` prefixes present; log the weights either side lacks and return the state dict.

    Raises:
        CheckpointMismatchError: :func:`check_weights_match` (not strict), or a needed weight missing.
    """
    from mmengine.logging import print_log
    if state_dict is None:
        state_dict = load_state_dict_file(path)
    check_weights_match(model, state_dict, source, strict=False)
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict]
    needed = [k for k in missing if k.startswith(need)]
    if needed:
        heads = tuple(p for p in need if p not in ('backbone.', 'neck.', ''))
        no_head = bool(heads) and any(k.startswith(heads) for k in needed) and \
            not any(k.startswith(heads) for k in state_dict)
        hint = (' It holds no head weights (' + ', '.join(f'{p}*' for p in heads) + '): a backbone-only file (what '
                'tools/convert_checkpoint.py writes without --keep-head) cannot segment or classify. Fix: convert the '
                'official whole model with --keep-head (e.g. tools/convert_checkpoint.py --model vit_adapter --source '
                'official --keep-head SRC DST; docs/checkpoints.md), or train the head from this file first'
                if no_head else ' Fix: pass a checkpoint that tools/train.py wrote with this config (official weights: '
                'tools/convert_checkpoint.py first, with --keep-head to keep their heads)')
        raise CheckpointMismatchError(
            f'{source} lacks {len(needed)} of the model\'s weights ({", ".join(needed[:3])}, ...): the file looks like '
            f'{checkpoint_kind(state_dict) or "an unknown model"}.{hint}')
    unexpected = [k for k in state_dict if k not in own]
    if missing or unexpected:
        print_log(f'{path}: not used: {len(unexpected)} file weights the model lacks {unexpected[:4]}; kept at '
                  f'init: {len(missing)} model weights the file lacks {missing[:4]}', logger='current')
    return state_dict


def load_model(config: str, checkpoint: str, need: tuple[str, ...] = ('backbone.', )) -> tuple[nn.Module, Config]:
    """Build ``config``'s model and load a training checkpoint (file or work dir) into it, checked by
    :func:`check_loaded_weights`. Returns the model in eval mode and the config."""
    cfg = Config.fromfile(config)
    model = build_from_config(cfg)
    path = resolve_checkpoint(checkpoint)
    state_dict = check_loaded_weights(model, path, need, f'{path} (with config {config})')
    model.load_state_dict(state_dict, strict=False)
    return model.eval(), cfg


def feature_module(model: nn.Module) -> nn.Module:
    """The module whose ``dense_features(x, layers)`` gives the model's patch features: the model, else its backbone.

    Raises:
        TypeError: neither has ``dense_features``.
    """
    from mmengine.model import is_model_wrapper
    model = model.module if is_model_wrapper(model) else model
    if hasattr(model, 'dense_features'):
        return model
    backbone = getattr(model, 'backbone', None)
    if backbone is not None and hasattr(backbone, 'dense_features'):
        return backbone
    raise TypeError(f'{type(model).__name__} (backbone: {type(backbone).__name__}) has no dense_features(x, layers); '
                    'implement it on the model or its backbone (beit_mm.evaluation.probe module docstring) to probe it')


def load_for_features(config: str, checkpoint: str | None = None, seed: int = 0) -> nn.Module:
    """``config``'s model in eval mode, random after ``torch.manual_seed(seed)``, then ``checkpoint``'s weights.

    Args:
        config: the config file.
        checkpoint: a file or work dir with the whole model or only its :func:`feature_module`; None keeps the init.
        seed: the seed of the random init.
    """
    cfg = Config.fromfile(config)
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    if checkpoint is None:
        return model
    path = resolve_checkpoint(checkpoint)
    target = feature_module(model)
    if target is model:  # the model itself gives the features (beit_mm.DVAE): every weight from its own file
        return load_model(config, path, need=('', ))[0]
    state = load_state_dict_file(path)
    if {f'backbone.{k}' for k in target.state_dict()} <= set(state):  # a checkpoint of this config's model
        return load_model(config, path)[0]
    prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else None
    target.init_cfg = dict(type='Pretrained', checkpoint=path, prefix=prefix)
    target.init_weights()
    return model.eval()
