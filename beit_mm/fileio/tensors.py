"""What every object that leaves the file room satisfies, checked once on the loaded object, whatever the format:
dense tensors inside their storages, not overlapping, declaring no more than the file holds (:func:`check_loaded`),
and metadata as plain Python values (:func:`plain_metadata`).

A file declares each tensor's storage, offset, shape and strides, and loaders rebuild exactly that: a tensor with
strides 0 over a 4-byte storage is valid to torch, and a fused optimizer kernel then writes past the storage.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from .names import check_name

#: Expanded entries and characters of text allowed in any file, and per storage it holds (a BEiT-L training
#: checkpoint: ~1,700 storages, ~10**5 entries and characters).
STRUCTURE_FIXED = 2**22
STRUCTURE_PER_STORAGE = 256


def structure_budget(storages: int) -> int:
    """How many entries plus characters of text a file holding ``storages`` distinct storages may expand to."""
    return STRUCTURE_FIXED + STRUCTURE_PER_STORAGE * storages


def is_dense(t: Tensor) -> bool:
    """Whether every element of ``t`` has its own bytes and none between them is skipped: its strides, in some order
    of its dimensions, are a contiguous tensor's."""
    if t.numel() == 0:
        return True
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _name(where: tuple) -> str:
    keys = []
    while where:
        where, key = where
        keys.append(str(key))
    return '.'.join(reversed(keys)) or '(the whole object)'


def _children(node, where: tuple):
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield key, where
            yield value, (where, key)
    elif isinstance(node, (list, tuple, set, frozenset)):
        for i, value in enumerate(node):
            yield value, (where, i)
    elif not isinstance(node, (str, bytes, bytearray, int, float, complex, type(None), np.ndarray, np.generic,
                               torch.dtype, torch.device, torch.Size)) and hasattr(node, '__dict__'):
        for key, value in vars(node).items():  # an allow-listed object's state (MMEngine's HistoryBuffer)
            yield value, (where, key)


def check_loaded(obj, source: str, file_bytes: int, error: type[Exception] = ValueError) -> None:
    """Refuse ``obj``, what a file of ``file_bytes`` bytes named ``source`` holds, unless every tensor in it is dense,
    inside its storage, overlapping no other (identical views aside), the whole declares no more bytes than the file
    holds and no more structure than its storages explain.

    Raises:
        error: naming ``source``, the entry (dotted keys) and the problem.
    """
    spent = 0
    storages: dict[int, tuple[int, dict]] = {}  # data_ptr -> (bytes, {view geometry: (start, end, name)})
    arrays: dict[int, int] = {}  # id -> bytes of numpy arrays
    stack = [(obj, ())]
    while stack:
        node, where = stack.pop()
        spent += 1 + (len(node) if isinstance(node, (str, bytes, bytearray)) else 0)
        if spent > structure_budget(len(storages) + len(arrays)):
            raise error(f'{source} expands to more than {structure_budget(len(storages) + len(arrays))} entries and '
                        f'characters of text, far more than a checkpoint of {len(storages) + len(arrays)} storages '
                        'holds (one object referenced again and again?): crafted. Fix: check the file\'s origin, save '
                        'it again from its source')
        if isinstance(node, Tensor):
            _check_tensor(node, source, where, storages, error)
        elif isinstance(node, np.ndarray):
            arrays[id(node)] = node.nbytes
        else:
            stack.extend(_children(node, where))
    views = sum(end - start for _, geometries in storages.values() for start, end, _ in geometries.values())
    held = sum(nbytes for nbytes, _ in storages.values())
    declared = max(views, held) + sum(arrays.values())
    if declared > file_bytes:
        raise error(f'{source} declares {declared} bytes of tensors and arrays, more than the file\'s {file_bytes}: '
                    'crafted (storages or records shared to multiply the data). Fix: check the file\'s origin, save '
                    'it again from its source')
    for _, geometries in storages.values():
        _check_overlap(geometries, source, error)


def _check_tensor(t: Tensor, source: str, where: tuple, storages: dict, error: type[Exception]) -> None:
    name = _name(where)
    if t.layout != torch.strided or t.is_quantized or t.is_nested:
        raise error(f'{source}: tensor {name} has layout {t.layout}{" (quantized)" if t.is_quantized else ""}; '
                    'beit_mm reads dense tensors only. Fix: save it as a dense tensor (tensor.to_dense())')
    if t.device.type == 'meta':
        raise error(f'{source}: tensor {name} has no data (device meta). Fix: save the tensor with its values')
    if not is_dense(t):
        raise error(f'{source}: tensor {name} of shape {tuple(t.shape)} has strides {t.stride()}: its elements '
                    'overlap or skip bytes (not dense), which no saved weight or optimizer state has and which '
                    'in-place kernels write past. Fix: save tensor.contiguous() (or check the file\'s origin)')
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    start = t.storage_offset() * t.element_size()
    end = start + t.numel() * t.element_size()
    if end > nbytes or start < 0:
        raise error(f'{source}: tensor {name} spans bytes {start}..{end} of a storage of {nbytes} bytes: outside its '
                    'storage. Fix: check the file\'s origin, save it again from its source')
    if t.numel() == 0:
        return
    _, geometries = storages.setdefault(storage.data_ptr(), (nbytes, {}))
    geometries.setdefault((t.dtype, tuple(t.shape), t.stride(), t.storage_offset()), (start, end, name))


def _check_overlap(geometries: dict, source: str, error: type[Exception]) -> None:
    reach, owner = -1, None
    for start, end, name in sorted(geometries.values()):
        if start < reach:
            raise error(f'{source}: tensors {owner} and {name} share bytes of one storage without being the same view '
                        '(torch.save shares a storage only between identical tied weights): crafted. Fix: check the '
                        'file\'s origin, save it again from its source')
        if end > reach:
            reach, owner = end, name


#: The deepest nesting of metadata (``dataset_meta``: a dict of lists of lists is 3 levels).
MAX_METADATA_DEPTH = 16


def plain_metadata(value, source: str, where: str, error: type[Exception] = ValueError, depth: int = 0):
    """``value`` (a file's metadata, e.g. ``meta.dataset_meta``) as plain Python values; tensors and numpy values
    become (nested lists of) Python numbers. Text is a name (:func:`~beit_mm.fileio.names.check_name`): class names are
    printed.

    Raises:
        error: any other object, nesting deeper than :data:`MAX_METADATA_DEPTH`, or text longer than a name or with
            control characters, naming ``source`` and ``where``.
    """
    if depth > MAX_METADATA_DEPTH:
        raise error(f'{source}: {where} nests deeper than {MAX_METADATA_DEPTH} levels: not metadata any toolkit writes. '
                    'Fix: check the file\'s origin')
    if isinstance(value, str):
        return check_name(value, source, where, error)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (Tensor, np.ndarray, np.generic)):
        return value.tolist() if not isinstance(value, np.generic) else value.item()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise error(f'{source}: {where} has a key of type {type(key).__name__}; metadata keys are str. Fix: '
                            'check the file\'s origin')
            out[key] = plain_metadata(item, source, f'{where}.{key}', error, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(plain_metadata(item, source, f'{where}[{i}]', error, depth + 1)
                           for i, item in enumerate(value))
    raise error(f'{source}: {where} holds a {type(value).__name__}; metadata are plain values (str, numbers, lists, '
                'dicts). Fix: check the file\'s origin')
