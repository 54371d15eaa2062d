"""What safe unpickling lets through: MMEngine's training state, and nothing else beyond tensors.

torch >= 2.6 loads with ``weights_only=True`` by default, and MMEngine 0.10.7 calls ``torch.load`` without that
argument, so ``--resume`` and ``load_from`` of MMEngine's own checkpoints fail with
``UnpicklingError: Weights only load failed ... HistoryBuffer``. Instead of turning safe loading off, this module
allow-lists exactly the non-tensor objects that ``Runner.save_checkpoint`` writes (found by loading a real runner
checkpoint with ``weights_only=True`` until it passed; ``tests/tools/test_tools.py`` checks each one is needed):

- ``message_hub.log_scalars`` holds :class:`mmengine.logging.HistoryBuffer` objects, whose ``_log_history`` and
  ``_count_history`` are numpy arrays, with numpy scalars in their state: ``numpy.core.multiarray._reconstruct``,
  ``numpy.core.multiarray.scalar`` (``numpy._core`` on numpy 2), ``numpy.ndarray``, ``numpy.dtype`` and the dtype
  classes ``numpy.dtypes.Float64DType``/``Int64DType`` (all numeric dtype classes are allowed: a message hub may log
  other dtypes);
- ``HistoryBuffer.__getstate__`` stores its statistics methods by reference, pickled as
  ``getattr(HistoryBuffer, 'mean')``. ``builtins.getattr`` itself is NOT allowed: the name is bound to
  :func:`history_buffer_statistic`, which resolves only those methods and refuses everything else.

Everything else in such a checkpoint (tensors, ``OrderedDict``, dicts, lists, tuples, str, numbers) is already allowed
by torch. Any other pickled class or function is still refused by ``torch.load``.
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
# HistoryBuffer._set_default_statistics registers these; custom ones are added by HistoryBuffer.register_statistics.
_DEFAULT_STATISTICS = ('min', 'max', 'current', 'mean')
# numpy's pickling constructors of arrays and scalars (under numpy.core on numpy 1, numpy._core on numpy 2)
_NDARRAY_RECONSTRUCT = np.ndarray(0).__reduce__()[0]
_NUMPY_SCALAR = np.float64(0).__reduce__()[0]


def history_buffer_statistic(owner: type, name: str) -> Callable:
    """``getattr`` as the weights-only unpickler sees it: returns ``HistoryBuffer.<name>`` for a registered statistics
    method and raises for any other owner or name.

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
    """The objects that ``torch.load(..., weights_only=True)`` must accept to read an MMEngine runner checkpoint.

    Returns:
        list: classes/functions, and ``(function, 'builtins.getattr')`` for the restricted ``getattr``, for
        ``torch.serialization.add_safe_globals``.
    """
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
    """Allow-list MMEngine's checkpoint types for ``weights_only`` loading (idempotent; runs on ``import beit_mm``).

    After this, ``Runner.resume``/``load_from`` and ``mmengine.runner.load_checkpoint`` read checkpoints written by
    an MMEngine runner, while arbitrary pickled objects are still refused.
    """
    torch.serialization.add_safe_globals(checkpoint_safe_globals())
