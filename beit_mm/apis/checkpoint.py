"""Checkpoints against models: a training checkpoint ``--resume`` can continue from, weights that fit a model.

Files are opened by :mod:`beit_mm.fileio` (safe unpickling, named errors, every source); this module decides whether
what they hold fits: :func:`check_resumable` and :func:`check_weights_match` turn a wrong file into a named error
before any training or inference.
"""
from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from ..fileio.checkpoint import CheckpointFileError, checkpoint_kind, open_checkpoint


class CheckpointMismatchError(ValueError):
    """A checkpoint's weights do not fit the model it is loaded into; the message lists the keys and shapes."""


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
