"""Checkpoints against models: a training checkpoint ``--resume`` can continue from, weights that fit a model.

Files are opened by :mod:`beit_mm.fileio` (safe unpickling, named errors, every source); this module decides whether
what they hold fits: :func:`check_resumable` and :func:`check_weights_match` turn a wrong file into a named error
before any training or inference.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
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


def _bad_values(own: Mapping[str, Tensor], state_dict: Mapping[str, Tensor]) -> tuple[list[str], list[str]]:
    """``(non-float, non-finite)``: the file's weights (same name and shape as the model's float tensors) of a
    non-floating dtype (int8, bool: ``load_state_dict`` would cast them silently), and those holding NaN or inf."""
    non_float, non_finite = [], []
    for key, value in state_dict.items():
        target = own.get(key)
        if not isinstance(value, Tensor) or target is None or not target.is_floating_point():
            continue
        if tuple(value.shape) != tuple(target.shape):
            continue  # named as a shape mismatch
        if not value.is_floating_point():
            non_float.append(f'{key} ({str(value.dtype).replace("torch.", "")})')
        elif not bool(torch.isfinite(value).all()):
            non_finite.append(f'{key} ({int((~torch.isfinite(value)).sum())} of {value.numel()} values)')
    return non_float, non_finite


def check_weights_match(model: nn.Module, state_dict: Mapping[str, Tensor], source: str, strict: bool = True,
                        may_lack: tuple[str, ...] = ()) -> None:
    """Raise :class:`CheckpointMismatchError` when ``state_dict`` does not fit ``model`` (before loading it).

    Shape mismatches are always errors (PyTorch would leave those weights random, or a fused optimizer resumed on
    them would corrupt memory), and so are weights that would load into a float tensor of the model as something else:
    a non-floating dtype (int8, bool: cast without a word, e.g. a quantized file) or NaN/inf values (a diverged run).
    With ``strict``, any model weight missing from the file or any file weight the model lacks is an error too, except
    model weights whose names start with one of ``may_lack`` (a fine-tuning start without the class head: the model's
    ``class_set_weights``). The message names the keys, shapes, what the file looks like and the fix.
    """
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict and not (may_lack and k.startswith(may_lack))]
    unexpected = [k for k in state_dict if k not in own]
    wrong = [f'{k} {tuple(state_dict[k].shape)} vs {tuple(own[k].shape)}' for k in own
             if k in state_dict and tuple(getattr(state_dict[k], 'shape', ())) != tuple(own[k].shape)]
    non_float, non_finite = _bad_values(own, state_dict)
    if not wrong and not non_float and not non_finite and not (strict and (missing or unexpected)):
        return
    kind = checkpoint_kind(state_dict) or 'an unknown model'
    parts = [f'{source} does not fit the model ({type(model).__name__}, {len(own)} weights); the file looks like '
             f'{kind}:']
    if wrong:
        parts.append(f'shapes differ for {_describe_keys(wrong, 3)} (file vs model)')
    if non_float:
        parts.append(f'weights that are not floating point where the model holds floats: {_describe_keys(non_float, 3)}'
                     ' (a quantized or corrupted file; loading would cast them silently)')
    if non_finite:
        parts.append(f'weights holding NaN or inf: {_describe_keys(non_finite, 3)} (a diverged run or a corrupted '
                     'file)')
    mismatch = bool(wrong) or strict and bool(missing or unexpected)
    if mismatch and missing:
        parts.append(f'model weights missing from the file: {_describe_keys(missing)}')
    if mismatch and unexpected:
        parts.append(f'file weights the model lacks: {_describe_keys(unexpected)}')
    fixes = []
    class_set = getattr(model, 'class_set_weights', ())
    if wrong and class_set and all(w.startswith(class_set) for w in wrong):
        fixes.append(f'the file was trained on another class set ({", ".join(class_set)} differ); to fine-tune on this '
                     'config\'s classes, drop them: tools/convert_checkpoint.py --model eomt --source beit_mm (or hf) '
                     '--drop-class-head SRC DST, then load_from=DST')
    if mismatch:
        fixes.append('pass the config this checkpoint was trained with; official or other-toolkit weights go through '
                     'tools/convert_checkpoint.py --model ... --source ... first (docs/checkpoints.md)')
    if non_float or non_finite:
        fixes.append('pass a float checkpoint with finite weights (for a diverged run, an earlier checkpoint of it)')
    parts.append('Fix: ' + '; '.join(fixes))
    raise CheckpointMismatchError(' '.join(parts))
