"""Build a config's model for analysis (pictures, FLOPs, inference): no pretrained files read, checkpoints checked.

- :func:`drop_pretrained_init`: remove every ``init_cfg=dict(type='Pretrained', ...)`` and ``pretrained='<path>'``
  from a model config, so the model builds without the official files it would otherwise load (their weights come
  from a checkpoint, or random weights are enough, as for counting FLOPs or timing a step).
- :func:`resolve_checkpoint`: a ``.pth`` file, or a ``tools/train.py`` work dir (its ``last_checkpoint``).
- :func:`build_from_config` / :func:`load_model`: the config's model, random or from a training checkpoint.
- :func:`model_class`: the class a config's model builds, its ``type`` looked up in the registry as
  ``MODELS.build`` does (so ``'EoMT'`` in scope ``beit_mm``, ``'beit_mm.EoMT'`` and a subclass registered under
  another name are all told apart by class, not by name).
- :func:`is_segmentor_config` / :func:`segmentor_inference_weights`: whether a config is a semantic segmentor
  (an mmseg ``BaseSegmentor``: ``EncoderDecoder``, ``beit_mm.EoMT``) and which of its weights inference reads;
  :func:`inference_weights`: the same for any config (``tools/test.py``). A model class declares them
  (``inference_weights``, as ``beit_mm.EoMT`` does); mmseg's ``EncoderDecoder`` and mmpretrain's
  ``ImageClassifier``, which declare nothing, have theirs here (:data:`FOREIGN_INFERENCE_WEIGHTS`).
- :func:`check_loaded_weights`: a checkpoint fits a model for inference (shapes, dtypes, finite values, the weights
  inference reads present).
"""
from __future__ import annotations

import os.path as osp

from mmengine.config import Config, ConfigDict
from mmengine.registry import init_default_scope
from mmpretrain.models.classifiers import ImageClassifier
from mmseg.models.segmentors import BaseSegmentor, EncoderDecoder
from torch import nn

from ..fileio.checkpoint import load_state_dict_file
from ..fileio.inputs import check_regular_file
from ..fileio.work_dir import read_last_checkpoint
from .checkpoint import CheckpointMismatchError, check_weights_match


def drop_pretrained_init(node) -> None:
    """Set every ``init_cfg`` of type ``Pretrained`` and every ``pretrained`` path (a string: mmseg's
    ``EncoderDecoder`` hands one to its backbone, which loads it in ``init_weights``, as in mmseg's own BEiT configs)
    under ``node`` (a config dict/list) to None, in place. A boolean ``pretrained`` (timm-style flags) is kept."""
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


ENCODER_DECODER_INFERENCE_WEIGHTS = ('backbone.', 'neck.', 'decode_head.')  # not the auxiliary head
CLASSIFIER_INFERENCE_WEIGHTS = ('backbone.', 'neck.', 'head.')  # mmpretrain ImageClassifier


# (class, the weight prefixes its inference reads) of the mmseg/mmpretrain classes, which declare no
# ``inference_weights`` of their own; their subclasses read the same unless they declare otherwise
FOREIGN_INFERENCE_WEIGHTS = ((EncoderDecoder, ENCODER_DECODER_INFERENCE_WEIGHTS),
                             (ImageClassifier, CLASSIFIER_INFERENCE_WEIGHTS))


def model_class(cfg: Config) -> type:
    """The class ``cfg.model`` builds: its ``type`` (a registered name, scoped or not, or a class) looked up in
    MMEngine's ``MODELS`` in the config's ``default_scope`` (``'mmseg'`` when unset, as :func:`build_from_config`),
    the lookup ``MODELS.build`` makes. Raises ``KeyError`` naming the config and the fix when nothing is
    registered under that name."""
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
    """True for a semantic segmentor: the config's model is an mmseg ``BaseSegmentor`` (``EncoderDecoder``,
    ``beit_mm.EoMT``, a subclass of either)."""
    return issubclass(model_class(cfg), BaseSegmentor)


def declared_inference_weights(cls: type) -> tuple[str, ...]:
    """The name prefixes of the weights inference reads in a model of class ``cls``: what the class declares
    (``inference_weights``, e.g. ``beit_mm.EoMT``), else what :data:`FOREIGN_INFERENCE_WEIGHTS` holds for its
    mmseg/mmpretrain base class, else every weight (``''``)."""
    declared = getattr(cls, 'inference_weights', None)
    if declared is not None:
        return tuple(declared)
    for base, weights in FOREIGN_INFERENCE_WEIGHTS:
        if issubclass(cls, base):
            return weights
    return ('', )


def inference_weights(cfg: Config) -> tuple[str, ...]:
    """The name prefixes of the weights a config's model reads at test time (:func:`declared_inference_weights` of
    :func:`model_class`): a segmentor's, a classifier's (:data:`CLASSIFIER_INFERENCE_WEIGHTS`), else every weight
    (``''``, e.g. a MIM model)."""
    return declared_inference_weights(model_class(cfg))


def segmentor_inference_weights(cfg: Config) -> tuple[str, ...]:
    """The name prefixes of the weights a segmentor's inference reads (a checkpoint lacking one is refused):
    :func:`inference_weights` (``beit_mm.EoMT.inference_weights``, an ``EncoderDecoder``'s
    :data:`ENCODER_DECODER_INFERENCE_WEIGHTS`)."""
    return inference_weights(cfg)


def resolve_checkpoint(path: str) -> str:
    """A checkpoint file as given, or the last checkpoint of a work dir (its ``last_checkpoint`` file, which must name
    a local file inside the work dir: :func:`beit_mm.fileio.work_dir.read_last_checkpoint`)."""
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
    """The config's model with random (its own init) weights and no ``Pretrained`` file read, in eval mode, SyncBN
    reverted to BN (one process)."""
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


def check_loaded_weights(model: nn.Module, path: str, need: tuple[str, ...], source: str,
                         state_dict: dict | None = None) -> dict:
    """Raise unless the checkpoint ``path`` fits ``model`` for inference: no weight of another shape, no non-float or
    NaN/inf weight where the model holds floats (:func:`beit_mm.apis.checkpoint.check_weights_match`), every weight
    whose name starts with one of ``need`` present (:class:`beit_mm.apis.checkpoint.CheckpointMismatchError`); the
    other weights the model or the file lack are named in one log line. Returns the file's state dict (``state_dict``
    when given: the file read already)."""
    from mmengine.logging import print_log

    from ..fileio.checkpoint import checkpoint_kind
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
