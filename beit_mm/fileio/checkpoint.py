"""Opening checkpoint files without running anything they carry: ``torch.load(weights_only=True)`` with the
allow-list of :mod:`.safe_globals`, and the stored config source (:data:`STORED_CONFIG_KEYS`, code
``Config.fromstring`` would execute) dropped on opening.
"""
from __future__ import annotations

import os
import os.path as osp
import pickle
import re
import zipfile
from collections.abc import Mapping
from typing import BinaryIO

import torch
from torch import Tensor

from .inputs import check_regular_file, open_input
from .tensors import check_loaded, plain_metadata

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


def _describe_head(head: bytes) -> str:
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            return what
    return f'first bytes {head[:8]!r}'


def check_checkpoint_file(path: str) -> None:
    """Raise with the cause and the fix unless ``path`` is a regular file that looks like a whole ``torch.save`` file.

    Raises:
        FileNotFoundError: no such file; NotARegularFileError (a FileNotFoundError): a folder, FIFO or device.
        CheckpointFileError: as :func:`check_checkpoint_stream`.
    """
    with open_input(path, 'checkpoint') as f:
        check_checkpoint_stream(f, path)


def check_checkpoint_stream(f: BinaryIO, path: str) -> int:
    """Raise with the cause and the fix unless the open regular file ``f`` (named ``path``) looks like a whole
    ``torch.save`` file; returns its size in bytes. Leaves ``f`` at its start.

    Raises:
        CheckpointFileError: empty, truncated, records declaring more than the file, or not a PyTorch file.
    """
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    head = f.read(32)
    f.seek(0)
    if size == 0:
        raise CheckpointFileError(f'checkpoint {path} is empty (0 bytes). Fix: download/copy it again')
    if head.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(f) as archive:
                records = archive.infolist()
        except (zipfile.BadZipFile, OSError):
            raise CheckpointFileError(
                f'checkpoint {path} is truncated or corrupt ({size} bytes, a zip archive without its central '
                'directory): the download or copy was interrupted, or the process writing it was killed. Fix: '
                'download/copy it again (compare its size or sha256 with the source), or resume from an earlier '
                'checkpoint (tools/train.py --resume picks the last complete one)') from None
        finally:
            f.seek(0)
        if not any(r.filename.endswith('data.pkl') for r in records):
            raise CheckpointFileError(f'{path} is a zip archive but not a torch.save file (no data.pkl among '
                                      f'{[r.filename for r in records[:4]]}). Fix: give the .pth/.bin file itself, '
                                      'not an archive of it')
        check_same_records(path, f, records)
        check_zip_records(path, size, records)
        return size
    if not head.startswith(_PICKLE_PROTOCOL_2):
        raise CheckpointFileError(
            f'{path} is not a PyTorch checkpoint ({size} bytes, {_describe_head(head)}). Fix: point to the .pth/.bin '
            'weights file (a failed download often saves an HTML page; a Git LFS pointer needs `git lfs pull`; '
            'safetensors files need safetensors.torch.load_file and torch.save first)')
    return size


MAX_ZIP_RECORDS = 1_000_000  # a BEiT-L training checkpoint has ~2k records


def check_same_records(path: str, f: BinaryIO, records: list[zipfile.ZipInfo]) -> None:
    """Refuse an archive that Python's zipfile (``records``, which the bounds are checked on) and the reader
    ``torch.load`` uses (``torch._C.PyTorchFileReader``, miniz) see differently: every record with the same name
    (less the archive folder), local header offset and size, none more. Leaves ``f`` at its start.

    Zip readers find the central directory in their own ways (Python's where the end record says it ends, miniz at
    the offset it declares), so one file can hold a directory for each.

    Raises:
        CheckpointFileError: naming the first difference.
    """
    python = sorted((r.filename.split('/', 1)[-1], r.header_offset, r.file_size) for r in records)
    f.seek(0)
    try:
        reader = torch._C.PyTorchFileReader(f)
        names = reader.get_all_records()
        seen = sorted((n, reader.get_record_header_offset(n), reader.get_record_size(n)) for n in names)
    except RuntimeError as error:
        seen = [('(torch cannot read it: ' + str(error).splitlines()[0][:200] + ')', 0, 0)]
    finally:
        f.seek(0)
    if seen != python:
        differ = next(((a, b) for a, b in zip(python, seen) if a != b), (python[len(seen):] or None,
                                                                          seen[len(python):] or None))
        raise CheckpointFileError(
            f'{path}: Python\'s zipfile reads {len(python)} records from it and torch\'s reader {len(seen)} '
            f'(first difference, as (name, offset, size): {differ[0]} vs {differ[1]}): an archive with two '
            'central directories, or a corrupt one; its bounds cannot be checked on what torch.load would read, so '
            'nothing was loaded. Fix: check the file\'s origin, save it again with torch.save')


def check_zip_records(path: str, size: int, records: list[zipfile.ZipInfo]) -> None:
    """Bound what a ``torch.save`` archive declares before torch reads it: a bounded number of ``records``, each
    stored uncompressed and inside the file of ``size`` bytes, together at most ``size`` bytes (records that share
    bytes would each become their own storage).

    Raises:
        CheckpointFileError: naming the record and the problem.
    """
    if len(records) > MAX_ZIP_RECORDS:
        raise CheckpointFileError(f'{path} declares {len(records)} records, more than {MAX_ZIP_RECORDS}: not a '
                                  'checkpoint torch.save wrote. Fix: check the file\'s origin')
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED:
            raise CheckpointFileError(
                f'{path}: record {record.filename} is compressed (method {record.compress_type}); torch.save stores '
                'records uncompressed, so the file was made or repacked by something else. Fix: save it again with '
                'torch.save')
        if record.file_size > size or record.header_offset + record.file_size > size:
            raise CheckpointFileError(f'{path}: record {record.filename} declares {record.file_size} bytes, beyond the '
                                      f'file\'s {size}: truncated or crafted. Fix: download/copy it again')
    declared = sum(record.file_size for record in records)
    if declared > size:
        raise CheckpointFileError(
            f'{path}: its {len(records)} records declare {declared} bytes in all, more than the file\'s {size}: '
            'records share bytes (torch.save never writes that), so loading would allocate more than the file holds. '
            'Crafted or corrupt. Fix: check the file\'s origin, save it again with torch.save')


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


def file_identity(path: str) -> tuple:
    """(real path, device, inode, size, modification time) of ``path``: it changes when the file is replaced or
    rewritten."""
    stat = os.stat(path)
    return osp.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def open_checkpoint(path: str, map_location='cpu'):
    """Read a checkpoint file safely: ``torch.load(weights_only=True)`` of the checked file, stored config source
    dropped, every tensor checked, ``meta.dataset_meta`` made plain values. Returns what the file holds.

    Raises:
        FileNotFoundError, CheckpointFileError: a missing, truncated or foreign file, one holding pickled objects
            beyond tensors and MMEngine's training state, or tensors outside their storage.
    """
    with open_input(path, 'checkpoint') as f:
        size = check_checkpoint_stream(f, path)
        try:
            obj = torch.load(f, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as error:
            raise CheckpointFileError(
                f'{path} holds pickled Python objects that safe loading (weights_only=True) refuses, e.g. a whole '
                f'nn.Module instead of a state dict ({str(error).splitlines()[0][:200]}). Fix: convert it once with '
                'tools/convert_checkpoint.py (DALL-E encoder.pkl: --model dalle --source openai), or save '
                'model.state_dict() instead of the model') from None
        except (RuntimeError, EOFError, OSError) as error:
            message = str(error).splitlines()[0][:200]
            if 'not resizable' in message or 'out of bounds for storage' in message:
                raise CheckpointFileError(f'{path}: a tensor lies outside its storage (torch: {message}): crafted or '
                                          'corrupt. Fix: check the file\'s origin, save it again from its '
                                          'source') from None
            raise CheckpointFileError(f'cannot read checkpoint {path}: {message}. Fix: download/copy it again; it is '
                                      'probably truncated or corrupt') from None
    if isinstance(obj, dict):
        drop_stored_configs(obj)
    check_loaded(obj, path, size, CheckpointFileError)
    meta = obj.get('meta') if isinstance(obj, dict) else None
    if isinstance(meta, dict) and 'dataset_meta' in meta:
        meta['dataset_meta'] = plain_metadata(meta['dataset_meta'], path, 'meta.dataset_meta', CheckpointFileError)
    return obj


def checkpoint_meta(path: str) -> dict:
    """The ``meta`` dict of a ``torch.save`` checkpoint ({} for none), read memory-mapped (no tensor data is read)
    from a zip-format file, else by :func:`open_checkpoint`; for a file :func:`open_checkpoint` has read."""
    if zipfile.is_zipfile(path):
        obj = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    else:
        obj = open_checkpoint(path)
    meta = obj.get('meta') if isinstance(obj, Mapping) else None
    return dict(meta) if isinstance(meta, Mapping) else {}


def unwrap_state_dict(obj: Mapping) -> dict[str, Tensor]:
    """The weights of a loaded checkpoint: ``obj['state_dict']``, ``obj['model']``, ... or ``obj`` itself."""
    for key in STATE_DICT_KEYS:
        if key in obj and isinstance(obj[key], Mapping):
            return dict(obj[key])
    if not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f'cannot find the weights in this checkpoint: top-level keys are {list(obj)[:8]}; expected '
                         f'one of {STATE_DICT_KEYS} or a flat state dict')
    return dict(obj)


def strip_prefix(state_dict: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Keys starting with ``prefix``, with it removed (e.g. 'backbone.' of a segmentor checkpoint)."""
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}


def rename_keys(state_dict: Mapping[str, Tensor], rules: list[tuple[str, str]]) -> dict[str, Tensor]:
    """Every key rewritten by each ``(pattern, replacement)`` of ``rules`` in turn (``re.sub``); values unchanged."""
    out = {}
    for key, value in state_dict.items():
        for pattern, repl in rules:
            key = re.sub(pattern, repl, key)
        out[key] = value
    return out


def load_state_dict_file(path: str) -> dict[str, Tensor]:
    """The flat state dict of a checkpoint file (:func:`open_checkpoint`, then :func:`unwrap_state_dict`)."""
    obj = open_checkpoint(path)
    if not isinstance(obj, Mapping):
        raise CheckpointFileError(f'{path} holds a {type(obj).__name__}, not a state dict. Fix: save '
                                  'model.state_dict() (or convert with tools/convert_checkpoint.py)')
    return unwrap_state_dict(obj)


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a whole ``torch.save`` file: a zip archive holding every tensor record (found by a
    memory-mapped load that reads no tensor data); an interrupted save leaves records out."""
    try:
        with open_input(path, 'checkpoint') as f, zipfile.ZipFile(f) as archive:
            if not any(name.endswith('data.pkl') for name in archive.namelist()):
                return False
        torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  (no regular file, BadZipFile, a missing record, an unreadable pickle)
        return False
    return True


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


def is_torchscript(path: str) -> bool:
    """Whether ``path`` is a TorchScript archive (a zip with ``constants.pkl``), from its table of contents only."""
    try:
        with open_input(path, 'checkpoint') as f:
            if not zipfile.is_zipfile(f):
                return False
            with zipfile.ZipFile(f) as archive:
                return any(n.endswith('constants.pkl') for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def open_torchscript_trusted(path: str) -> dict[str, Tensor]:
    """The checked ``state_dict()`` of a TorchScript archive. ``torch.jit.load`` runs the code the archive carries:
    only for a file the user named as trusted."""
    size = check_regular_file(path, 'checkpoint')
    if not is_torchscript(path):
        raise CheckpointFileError(f'{path} is not a TorchScript archive (a zip with constants.pkl). Fix: without '
                                  '--trust-code, plain state dict files are read safely')
    state_dict = {k: v.detach().clone() for k, v in torch.jit.load(path, map_location='cpu').state_dict().items()}
    check_loaded(state_dict, path, size, CheckpointFileError)
    return state_dict


def refuse_code(path: str, what: str, convert: str) -> CheckpointFileError:
    """The refusal of a file whose loading runs code it carries, naming the ``convert`` command that makes it a
    plain state dict."""
    return CheckpointFileError(
        f'{path} is {what}: loading it runs code the file carries, so beit_mm does not load it unless you trust it '
        f'by name. Fix: convert it once into a plain state dict, e.g. `{convert}`, and use the converted file')


MAX_SAFETENSORS_HEADER = 100 * 2**20  # the safetensors format's own limit


def load_safetensors(path: str) -> dict[str, Tensor]:
    """The tensors of a ``.safetensors`` file, its header bounded and checked first (length, JSON nesting, every
    tensor's byte range inside the data).

    Raises:
        FileNotFoundError, CheckpointFileError: a missing, truncated or crafted file, named.
    """
    import struct

    from safetensors.torch import load as load_bytes

    from .json_file import JSONFileError, parse_json
    with open_input(path, 'checkpoint') as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        length = struct.unpack('<Q', head)[0] if len(head) == 8 else -1
        if not 0 < length <= min(MAX_SAFETENSORS_HEADER, size - 8):
            raise CheckpointFileError(f'{path} is not a whole safetensors file ({size} bytes, header length '
                                      f'{length}). Fix: download/copy it again (compare its size with the source)')
        try:
            header = parse_json(f.read(length), f'{path} (safetensors header)')
        except JSONFileError as error:
            raise CheckpointFileError(str(error)) from None
        data = size - 8 - length
        for name, entry in (header.items() if isinstance(header, dict) else ()):
            if name == '__metadata__':
                continue
            offsets = entry.get('data_offsets') if isinstance(entry, dict) else None
            if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                    or not 0 <= offsets[0] <= offsets[1] <= data):
                raise CheckpointFileError(f'{path}: tensor {name} declares bytes {offsets} outside the file\'s {data} '
                                          'data bytes: truncated or crafted. Fix: download/copy it again')
        f.seek(0)
        content = f.read()
    try:
        tensors = load_bytes(content)
    except Exception as error:  # safetensors_rust.SafetensorError: an inconsistent header
        raise CheckpointFileError(f'{path} is not a whole safetensors file ({str(error)[:160]}). Fix: download/copy '
                                  'it again (compare its size with the source)') from None
    check_loaded(tensors, path, size, CheckpointFileError)
    return tensors
