"""Checkpoints against models: the weight checks (:mod:`beit_mm.models.builder`) and the file errors
(:mod:`beit_mm.fileio`) under the entry points' names; :func:`check_resumable` for ``--resume``."""
from __future__ import annotations

from collections.abc import Mapping

from ..fileio.checkpoint import CheckpointFileError, open_checkpoint
from ..models.builder import CheckpointMismatchError, check_weights_match  # noqa: F401


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
