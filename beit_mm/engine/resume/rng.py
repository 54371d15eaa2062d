"""The generator states a resumed checkpoint restores (``beit_mm.RNGStateHook``), checked before any is set."""
from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from .fields import MAX_BATCH_RECORD, MAX_SEED, MT_WORDS, PYTHON_RANDOM_VERSION, RNG_STATE_KEYS, _bounded_int, _is_real, _refuse, is_dense


_RNG_FIX = ('resume from a checkpoint tools/train.py wrote (beit_mm.RNGStateHook), or start a new run from its weights '
            'only: --cfg-options load_from=CHECKPOINT (no --resume)')


def _check_words(source: str, key: str, words, length: int) -> None:
    """A dense int64 tensor of ``length`` Mersenne Twister words, each in [0, 2**32 - 1]."""
    if not (isinstance(words, Tensor) and words.dtype == torch.int64 and tuple(words.shape) == (length,)
            and is_dense(words)):
        raise _refuse(source, key, words, f'expected a dense int64 tensor of shape ({length},)', _RNG_FIX)
    if length and not (int(words.min()) >= 0 and int(words.max()) <= MAX_SEED):
        raise _refuse(source, key, words, 'holds words outside [0, 2**32 - 1]', _RNG_FIX)


def _check_generator(source: str, key: str, state, device: str) -> None:
    """A generator state torch's own generator of ``device`` accepts (tried on a scratch generator)."""
    own = torch.get_rng_state() if device == 'cpu' else torch.cuda.get_rng_state()
    if not (isinstance(state, Tensor) and state.dtype == torch.uint8 and tuple(state.shape) == tuple(own.shape)
            and is_dense(state)):
        raise _refuse(source, key, state, f'expected a dense uint8 tensor of shape {tuple(own.shape)} (torch\'s '
                      f'{device} generator state)', _RNG_FIX)
    try:
        torch.Generator(device=device).set_state(state)
    except RuntimeError as error:
        raise _refuse(source, key, state, f'torch refuses it ({str(error).splitlines()[0][:120]})', _RNG_FIX) from None


def check_rng_state(state, source: str, key: str) -> None:
    """One process's generator states as ``beit_mm.RNGStateHook`` saves them, with Mersenne Twister words in range.

    Raises:
        TrainingStateError: naming the first entry that differs.
    """
    if not isinstance(state, Mapping) or any(k not in state for k in RNG_STATE_KEYS):
        raise _refuse(source, key, state, f'expected a dict with {", ".join(RNG_STATE_KEYS)}', _RNG_FIX)
    _check_generator(source, f"{key}['torch']", state['torch'], 'cpu')
    cuda = state['cuda']
    if cuda is not None:
        if torch.cuda.is_available():
            _check_generator(source, f"{key}['cuda']", cuda, 'cuda')
        elif not (isinstance(cuda, Tensor) and cuda.dtype == torch.uint8 and cuda.ndim == 1 and is_dense(cuda)):
            raise _refuse(source, f"{key}['cuda']", cuda, 'expected None or a dense uint8 tensor', _RNG_FIX)
    np_state, py_state = state['numpy'], state['python']
    if not isinstance(np_state, Mapping) or not isinstance(py_state, Mapping):
        raise _refuse(source, key, state, 'numpy and python must be dicts', _RNG_FIX)
    _check_words(source, f"{key}['numpy']['keys']", np_state.get('keys'), MT_WORDS)
    for name, ok, expected in (('pos', _bounded_int(np_state.get('pos'), 0, MT_WORDS), f'an int in [0, {MT_WORDS}]'),
                               ('has_gauss', _bounded_int(np_state.get('has_gauss'), 0, 1), '0 or 1'),
                               ('cached_gaussian', _is_real(np_state.get('cached_gaussian')), 'a finite float')):
        if not ok:
            raise _refuse(source, f"{key}['numpy']['{name}']", np_state.get(name), f'expected {expected}', _RNG_FIX)
    if py_state.get('version') != PYTHON_RANDOM_VERSION or isinstance(py_state.get('version'), bool):
        raise _refuse(source, f"{key}['python']['version']", py_state.get('version'),
                      f'expected {PYTHON_RANDOM_VERSION} (CPython\'s random)', _RNG_FIX)
    words = py_state.get('state')
    _check_words(source, f"{key}['python']['state']", words, MT_WORDS + 1)
    if int(words[-1]) > MT_WORDS:
        raise _refuse(source, f"{key}['python']['state']", words, f'its last entry (the position) must be in '
                      f'[0, {MT_WORDS}]', _RNG_FIX)
    gauss_next = py_state.get('gauss_next')
    if gauss_next is not None and not _is_real(gauss_next):
        raise _refuse(source, f"{key}['python']['gauss_next']", gauss_next, 'expected None or a finite float',
                      _RNG_FIX)


def check_rng_states(states, source: str) -> None:
    """``checkpoint['rng_states']``: None (not saved), or a list indexed by rank of None (unknown) or
    :func:`check_rng_state` entries."""
    if states is None:
        return
    if not isinstance(states, (list, tuple)) or len(states) > MAX_BATCH_RECORD:
        raise _refuse(source, 'rng_states', states, 'expected a list indexed by rank', _RNG_FIX)
    for rank, state in enumerate(states):
        if state is not None:
            check_rng_state(state, source, f'rng_states[{rank}]')
