"""What safe unpickling lets through: MMEngine's training state, and nothing else beyond tensors.

Exactly the non-tensor objects ``Runner.save_checkpoint`` writes are allow-listed: ``HistoryBuffer``, the numpy
constructors and dtypes in its state, and its statistics methods, which pickle as ``getattr(HistoryBuffer, 'mean')``;
``builtins.getattr`` is bound to :func:`history_buffer_statistic`, which resolves only those.
"""
from __future__ import annotations

import pickle
from typing import Callable

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

# numpy dtypes whose arrays MMEngine's message hub can hold (logged losses, counts, lrs, times).
_NUMPY_DTYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                 np.float16, np.float32, np.float64)
# HistoryBuffer's default statistics; custom ones are in HistoryBuffer._statistics_methods.
_DEFAULT_STATISTICS = ('min', 'max', 'current', 'mean')
_NDARRAY_RECONSTRUCT = np.ndarray(0).__reduce__()[0]
_NUMPY_SCALAR = np.float64(0).__reduce__()[0]


def history_buffer_statistic(owner: type, name: str) -> Callable:
    """``getattr`` as the weights-only unpickler sees it: ``HistoryBuffer.<name>`` for a statistics method only.

    Raises:
        pickle.UnpicklingError: for anything but a HistoryBuffer statistics method.
    """
    if owner is HistoryBuffer and (name in _DEFAULT_STATISTICS or name in HistoryBuffer._statistics_methods):
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f'weights_only loading refuses getattr({owner!r}, {name!r}): beit_mm allows getattr only for '
        f'HistoryBuffer statistics methods ({", ".join(_DEFAULT_STATISTICS)}). Load only trusted files with '
        'weights_only=False.')


def checkpoint_safe_globals() -> list:
    """The objects ``torch.load(..., weights_only=True)`` must accept to read an MMEngine runner checkpoint, for
    ``torch.serialization.add_safe_globals`` (the restricted ``getattr`` as ``(function, 'builtins.getattr')``)."""
    return [
        HistoryBuffer,
        (history_buffer_statistic, 'builtins.getattr'),
        *((func, f'{module}.multiarray.{name}') for module in ('numpy.core', 'numpy._core')
          for func, name in ((_NDARRAY_RECONSTRUCT, '_reconstruct'), (_NUMPY_SCALAR, 'scalar'))),
        np.ndarray,
        np.dtype,
        *(type(np.dtype(t)) for t in _NUMPY_DTYPES),
    ]


def register_checkpoint_safe_globals() -> None:
    """Allow-list MMEngine's checkpoint types for ``weights_only`` loading (idempotent)."""
    torch.serialization.add_safe_globals(checkpoint_safe_globals())
