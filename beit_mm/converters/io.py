"""Reading checkpoint files into a flat state dict, with safe (weights-only) unpickling, and errors that say what
the file is when it is not a checkpoint (missing, truncated, another format, a pickled module)."""
from __future__ import annotations

import os.path as osp
import pickle
import re
import zipfile
from collections.abc import Mapping

import torch
from torch import Tensor

# Keys under which checkpoint files of the supported toolkits keep their weights, in lookup order.
STATE_DICT_KEYS = ('state_dict', 'model', 'module', 'model_state')


def unwrap_state_dict(obj: Mapping) -> dict[str, Tensor]:
    """The weights of a loaded checkpoint: ``obj['state_dict']``, ``obj['model']``, ... or ``obj`` itself."""
    for key in STATE_DICT_KEYS:
        if key in obj and isinstance(obj[key], Mapping):
            return dict(obj[key])
    if not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f'cannot find the weights in this checkpoint: top-level keys are {list(obj)[:8]}; expected '
                         f'one of {STATE_DICT_KEYS} or a flat state dict')
    return dict(obj)


# how the files users pass by mistake start (first bytes -> what it is)
_ZIP_MAGIC = b'PK\x03\x04'  # torch.save's format since torch 1.6
_PICKLE_PROTOCOL_2 = b'\x80\x02'  # torch's legacy (pre-1.6) format starts with a pickled magic number
_OTHER_FORMATS = ((b'\xff\xd8\xff', 'a JPEG image'), (b'\x89PNG', 'a PNG image'), (b'<', 'an HTML/XML page'),
                  (b'version https://git-lfs', 'a Git LFS pointer'), (b'{', 'a JSON/safetensors header or text'))


class CheckpointFileError(ValueError):
    """A file given as a checkpoint cannot be read as one; the message says what the file is and what to do."""


def _describe_head(head: bytes) -> str:
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            return what
    return f'first bytes {head[:8]!r}'


def check_checkpoint_file(path: str) -> None:
    """Raise with the cause and the fix unless ``path`` looks like a whole ``torch.save`` file (no unpickling).

    Raises:
        FileNotFoundError: no such file.
        CheckpointFileError: empty, truncated (a zip without its central directory: an interrupted download/copy or
            a killed writer) or not a PyTorch file (an image, an HTML error page, a Git LFS pointer, safetensors, ...).
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint {path} does not exist. Fix: check the path (init_cfg.checkpoint, '
                                'load_from, --resume); convert official weights first with tools/convert_checkpoint.py')
    size = osp.getsize(path)
    with open(path, 'rb') as f:
        head = f.read(32)
    if size == 0:
        raise CheckpointFileError(f'checkpoint {path} is empty (0 bytes). Fix: download/copy it again')
    if head.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
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


def load_state_dict_file(path: str) -> dict[str, Tensor]:
    """Load a checkpoint file with ``weights_only=True`` (safe unpickling) and return its flat state dict.

    Raises:
        FileNotFoundError, CheckpointFileError: see :func:`check_checkpoint_file`; also when the file holds pickled
            Python objects beyond tensors (a whole ``nn.Module``) or cannot be read.
    """
    check_checkpoint_file(path)
    try:
        obj = torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointFileError(
            f'{path} holds pickled Python objects that safe loading (weights_only=True) refuses, e.g. a whole '
            f'nn.Module instead of a state dict ({str(error).splitlines()[0][:200]}). Fix: convert it once with '
            'tools/convert_checkpoint.py (DALL-E encoder.pkl: --model dalle --source openai), or save '
            'model.state_dict() instead of the model') from None
    except (RuntimeError, EOFError) as error:
        raise CheckpointFileError(f'cannot read checkpoint {path}: {str(error).splitlines()[0][:200]}. Fix: '
                                  'download/copy it again; it is probably truncated or corrupt') from None
    if not isinstance(obj, Mapping):
        raise CheckpointFileError(f'{path} holds a {type(obj).__name__}, not a state dict. Fix: save '
                                  'model.state_dict() (or convert with tools/convert_checkpoint.py)')
    return unwrap_state_dict(obj)


def strip_prefix(state_dict: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Keys starting with ``prefix``, with it removed (e.g. 'backbone.' of a segmentor checkpoint)."""
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}


# What a state dict's keys say about where it comes from: (description, key pattern), first match wins per key.
CHECKPOINT_KINDS = (
    ('a whole segmentor/classifier/MIM model (backbone under "backbone.")', re.compile(r'^backbone\.')),
    ('a CvT (beit_mm or official microsoft/CvT names)', re.compile(r'^stage\d+\.')),
    ('an HF transformers CvT', re.compile(r'^(cvt\.)?encoder\.stages\.')),
    ('an HF transformers BEiT', re.compile(r'^(beit\.)?(encoder\.layer\.|embeddings\.)')),
    ('an mmseg/mmpretrain BEiT', re.compile(r'^layers\.\d+\.')),
    ('a BEiT (beit_mm, unilm or timm names)', re.compile(r'^(blocks\.\d+\.|patch_embed\.proj\.|cls_token$)')),
)


def checkpoint_kind(keys) -> str | None:
    """The :data:`CHECKPOINT_KINDS` description matched by most of ``keys``, or None when none matches."""
    votes: dict[str, int] = {}
    for key in keys:
        for kind, pattern in CHECKPOINT_KINDS:
            if pattern.match(key):
                votes[kind] = votes.get(kind, 0) + 1
                break
    return max(votes, key=votes.get) if votes else None
