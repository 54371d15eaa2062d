"""Opening checkpoint files: the one place that decides how beit_mm, and MMEngine through it, reads a checkpoint.

A checkpoint is data from whoever made it, so opening one never runs what it carries:

- tensors and MMEngine's training state are unpickled with ``torch.load(weights_only=True)`` (the allow-list of
  :mod:`beit_mm.engine.checkpoint`); a pickled module or function is refused with a named error;
- the config strings a training checkpoint stores (:data:`STORED_CONFIG_KEYS`: ``meta.cfg``, ``meta.config``,
  ``message_hub.runtime_info.cfg``) are Python source that ``mmengine.Config.fromstring`` would execute (MMEngine's
  ``Runner.resume`` does for ``meta.config``; its inferencers for ``meta.cfg`` when no config is given). They are
  dropped on opening; the tools build models from the config file the user names.

:func:`open_checkpoint` is registered as MMEngine's loader of local files (``CheckpointLoader``, prefix ``''``) on
``import beit_mm``, so ``--resume``, ``load_from``, ``init_cfg=dict(type='Pretrained')`` and the inferencers open
files here too. :func:`load_state_dict_file` returns a file's flat weights; :func:`check_resumable` and
:func:`check_weights_match` turn a wrong file into a named error before any training or inference.
"""
from __future__ import annotations

import os.path as osp
import pickle
import zipfile
from collections.abc import Mapping

import torch
from torch import Tensor, nn

# Keys under which checkpoint files of the supported toolkits keep their weights, in lookup order.
STATE_DICT_KEYS = ('state_dict', 'model', 'module', 'model_state')
# Config source code stored in MMEngine training checkpoints: (path of keys) -> dropped on opening.
STORED_CONFIG_KEYS = (('meta', 'cfg'), ('meta', 'config'), ('message_hub', 'runtime_info', 'cfg'))

# how the files users pass by mistake start (first bytes -> what it is)
_ZIP_MAGIC = b'PK\x03\x04'  # torch.save's format since torch 1.6
_PICKLE_PROTOCOL_2 = b'\x80\x02'  # torch's legacy (pre-1.6) format starts with a pickled magic number
_OTHER_FORMATS = ((b'\xff\xd8\xff', 'a JPEG image'), (b'\x89PNG', 'a PNG image'), (b'<', 'an HTML/XML page'),
                  (b'version https://git-lfs', 'a Git LFS pointer'), (b'{', 'a JSON/safetensors header or text'),
                  (b'\x08', 'an ONNX model (protobuf)'))


class CheckpointFileError(ValueError):
    """A file given as a checkpoint cannot be read as one; the message says what the file is and what to do."""


class CheckpointMismatchError(ValueError):
    """A checkpoint's weights do not fit the model it is loaded into; the message lists the keys and shapes."""


def _describe_head(head: bytes) -> str:
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            return what
    return f'first bytes {head[:8]!r}'


def check_checkpoint_file(path: str) -> None:
    """Raise with the cause and the fix unless ``path`` looks like a whole ``torch.save`` file (no unpickling).

    Raises:
        FileNotFoundError: no such file (or a folder).
        CheckpointFileError: empty, truncated (a zip without its central directory: an interrupted download/copy or
            a killed writer) or not a PyTorch file (an image, an HTML error page, a Git LFS pointer, safetensors,
            ONNX, ...).
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint {path} does not exist{" (it is a folder)" if osp.isdir(path) else ""}. '
                                'Fix: check the path (init_cfg.checkpoint, load_from, --resume); convert official '
                                'weights first with tools/convert_checkpoint.py')
    size = osp.getsize(path)
    with open(path, 'rb') as f:
        head = f.read(32)
    if size == 0:
        raise CheckpointFileError(f'checkpoint {path} is empty (0 bytes). Fix: download/copy it again')
    if head.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError):
            raise CheckpointFileError(
                f'checkpoint {path} is truncated or corrupt ({size} bytes, a zip archive without its central '
                'directory): the download or copy was interrupted, or the process writing it was killed. Fix: '
                'download/copy it again (compare its size or sha256 with the source), or resume from an earlier '
                'checkpoint (tools/train.py --resume picks the last complete one)') from None
        if not any(n.endswith('data.pkl') for n in names):
            raise CheckpointFileError(f'{path} is a zip archive but not a torch.save file (no data.pkl among '
                                      f'{names[:4]}). Fix: give the .pth/.bin file itself, not an archive of it')
        return
    if not head.startswith(_PICKLE_PROTOCOL_2):
        raise CheckpointFileError(
            f'{path} is not a PyTorch checkpoint ({size} bytes, {_describe_head(head)}). Fix: point to the .pth/.bin '
            'weights file (a failed download often saves an HTML page; a Git LFS pointer needs `git lfs pull`; '
            'safetensors files need safetensors.torch.load_file and torch.save first)')


def drop_stored_configs(obj: Mapping) -> list[str]:
    """Remove :data:`STORED_CONFIG_KEYS` from a loaded checkpoint, in place; returns the dotted keys removed."""
    dropped = []
    for keys in STORED_CONFIG_KEYS:
        node = obj
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, dict) and keys[-1] in node:
            del node[keys[-1]]
            dropped.append('.'.join(keys))
    return dropped


def open_checkpoint(path: str, map_location='cpu'):
    """Read a checkpoint file safely: :func:`check_checkpoint_file`, ``torch.load(weights_only=True)``, stored config
    source dropped (:func:`drop_stored_configs`). Returns what the file holds (usually a dict).

    Raises:
        FileNotFoundError, CheckpointFileError: a missing, truncated or foreign file, or one that holds pickled
            Python objects beyond tensors and MMEngine's training state (a whole ``nn.Module``).
    """
    from ..engine.checkpoint import register_checkpoint_safe_globals
    register_checkpoint_safe_globals()
    check_checkpoint_file(path)
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointFileError(
            f'{path} holds pickled Python objects that safe loading (weights_only=True) refuses, e.g. a whole '
            f'nn.Module instead of a state dict ({str(error).splitlines()[0][:200]}). Fix: convert it once with '
            'tools/convert_checkpoint.py (DALL-E encoder.pkl: --model dalle --source openai), or save '
            'model.state_dict() instead of the model') from None
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointFileError(f'cannot read checkpoint {path}: {str(error).splitlines()[0][:200]}. Fix: '
                                  'download/copy it again; it is probably truncated or corrupt') from None
    if isinstance(obj, dict):
        drop_stored_configs(obj)
    return obj


def unwrap_state_dict(obj: Mapping) -> dict[str, Tensor]:
    """The weights of a loaded checkpoint: ``obj['state_dict']``, ``obj['model']``, ... or ``obj`` itself."""
    for key in STATE_DICT_KEYS:
        if key in obj and isinstance(obj[key], Mapping):
            return dict(obj[key])
    if not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f'cannot find the weights in this checkpoint: top-level keys are {list(obj)[:8]}; expected '
                         f'one of {STATE_DICT_KEYS} or a flat state dict')
    return dict(obj)


def load_state_dict_file(path: str) -> dict[str, Tensor]:
    """The flat state dict of a checkpoint file (:func:`open_checkpoint`, then :func:`unwrap_state_dict`)."""
    obj = open_checkpoint(path)
    if not isinstance(obj, Mapping):
        raise CheckpointFileError(f'{path} holds a {type(obj).__name__}, not a state dict. Fix: save '
                                  'model.state_dict() (or convert with tools/convert_checkpoint.py)')
    return unwrap_state_dict(obj)


def check_resumable(path: str, with_ema: bool) -> dict:
    """The training checkpoint ``path`` opened, or a named error when ``--resume`` cannot continue from it.

    Args:
        path: the checkpoint ``--resume`` names.
        with_ema: whether this run keeps an EMA (``--ema`` or an ``EMAHook`` in the config).

    Raises:
        CheckpointFileError: a state dict without training state (meta/message_hub), or a run with an EMA resumed
            without one (its raw weights would be dropped).
    """
    obj = open_checkpoint(path)
    meta = obj.get('meta') if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or 'iter' not in meta or 'message_hub' not in obj or 'state_dict' not in obj:
        raise CheckpointFileError(
            f'{path} holds weights but no training state (no meta.iter/message_hub: top-level keys '
            f'{list(obj)[:6] if isinstance(obj, Mapping) else type(obj).__name__}), so --resume cannot continue a run '
            'from it. Fix: to start a new run from these weights pass --cfg-options load_from=' + path
            + ' (or set the backbone\'s init_cfg); --resume takes a checkpoint that tools/train.py wrote')
    if 'ema_state_dict' in obj and not with_ema:
        raise CheckpointFileError(
            f'{path} was saved by a run with --ema (its state_dict holds the EMA weights, ema_state_dict the raw '
            'ones); resuming without --ema would continue from the EMA weights and drop the raw ones. Fix: resume '
            'with --ema')
    return obj


def _describe_keys(keys: list[str], limit: int = 5) -> str:
    return f'{len(keys)} ({", ".join(keys[:limit])}{", ..." if len(keys) > limit else ""})'


def check_weights_match(model: nn.Module, state_dict: Mapping[str, Tensor], source: str, strict: bool = True) -> None:
    """Raise :class:`CheckpointMismatchError` when ``state_dict`` does not fit ``model`` (before loading it).

    Shape mismatches are always errors (PyTorch would leave those weights random, or a fused optimizer resumed on
    them would corrupt memory). With ``strict``, any model weight missing from the file or any file weight the model
    lacks is an error too. The message names the keys, shapes, what the file looks like and the converter.
    """
    from ..converters.io import checkpoint_kind
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    wrong = [f'{k} {tuple(state_dict[k].shape)} vs {tuple(own[k].shape)}' for k in own
             if k in state_dict and tuple(getattr(state_dict[k], 'shape', ())) != tuple(own[k].shape)]
    if not wrong and not (strict and (missing or unexpected)):
        return
    kind = checkpoint_kind(state_dict) or 'an unknown model'
    parts = [f'{source} does not fit the model ({type(model).__name__}, {len(own)} weights); the file looks like '
             f'{kind}:']
    if wrong:
        parts.append(f'shapes differ for {_describe_keys(wrong, 3)} (file vs model)')
    if missing:
        parts.append(f'model weights missing from the file: {_describe_keys(missing)}')
    if unexpected:
        parts.append(f'file weights the model lacks: {_describe_keys(unexpected)}')
    parts.append('Fix: pass the config this checkpoint was trained with; official or other-toolkit weights go through '
                 'tools/convert_checkpoint.py --model ... --source ... first (docs/checkpoints.md)')
    raise CheckpointMismatchError(' '.join(parts))


def _mmengine_local_loader(filename: str, map_location=None):
    """MMEngine's ``CheckpointLoader`` scheme for local paths, through :func:`open_checkpoint`."""
    return open_checkpoint(osp.expanduser(filename), map_location=map_location)


def register_mmengine_loader() -> None:
    """Make MMEngine open local checkpoint files with :func:`open_checkpoint` (idempotent; on ``import beit_mm``)."""
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes='', force=True)(_mmengine_local_loader)
