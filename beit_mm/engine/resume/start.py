"""The checkpoint a run starts from: opened once, checked against the model before anything trains, then loaded."""
from __future__ import annotations

import logging
from collections.abc import Mapping

import torch
from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import MODELS, init_default_scope

from ...fileio import CheckpointFileError, load_state_dict_file, open_checkpoint, unwrap_state_dict
from ...fileio.work_dir import find_last_complete_checkpoint
from ...models.builder import CheckpointMismatchError, check_weights_match
from ..hooks.ema import has_ema_hook
from ..hooks.rng_state import use_rng_state_hook
from ..launch import is_rank_zero
from .guard import use_checkpoint_guard_hook
from .opened import OpenedCheckpoint, give_to_runner, identity_or_none


class StartCheckpointError(ValueError):
    """The checkpoint a run would start from cannot be used; the message names the request, the file and the fix."""


def check_resumable(path: str, with_ema: bool) -> dict:
    """The training checkpoint ``path`` opened, for a run with an EMA or not (``with_ema``).

    Raises:
        CheckpointFileError: no training state in the file, or an EMA checkpoint resumed without ``--ema``.
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


def set_resume(cfg: Config, resume: str, how: str = '--resume') -> OpenedCheckpoint | None:
    """Open the checkpoint a run resumes from, before anything is built.

    Args:
        cfg: the run's config; ``resume``/``load_from`` are set in place.
        resume: a checkpoint path, or ``'auto'`` for the work dir's last complete checkpoint.
        how: the request, for messages.

    Returns:
        The opened checkpoint, or None for a new run.

    Raises:
        StartCheckpointError: the file cannot be resumed.
    """
    if resume == 'auto':
        resume = find_last_complete_checkpoint(cfg.work_dir)
        if resume is None:
            if is_rank_zero():
                print_log(f'{how}: no checkpoint in {cfg.work_dir}, starting a new run', logger='current',
                          level=logging.WARNING)
            cfg.resume = False  # else MMEngine's own auto-resume follows last_checkpoint unchecked
            return None
    identity = identity_or_none(resume)  # before reading: a file rewritten meanwhile is read again by the load
    try:
        checkpoint = check_resumable(resume, has_ema_hook(cfg))
    except (FileNotFoundError, CheckpointFileError) as error:
        raise StartCheckpointError(f'{how}: {error}') from None
    cfg.resume, cfg.load_from = True, resume
    return OpenedCheckpoint(resume, identity, checkpoint)


def prepare_start(cfg: Config, resume: str | None, how: str = '--resume',
                  schedule_in_samples: bool = False) -> OpenedCheckpoint | None:
    """:func:`set_resume` (``resume`` None: a new run), then add the resume guard (``schedule_in_samples``: convert
    another global batch) and the RNG-state hook to ``cfg``; returns the opened checkpoint or None."""
    opened = set_resume(cfg, resume, how) if resume is not None else None
    use_checkpoint_guard_hook(cfg, schedule_in_samples=schedule_in_samples)
    use_rng_state_hook(cfg, opened.checkpoint if opened is not None else None)
    return opened


def check_start_checkpoint(runner, cfg: Config, opened: OpenedCheckpoint | None = None) -> None:
    """Check that the ``--resume``/``load_from`` checkpoint fits the model, then give it to ``runner``'s load.

    Args:
        runner: the built runner (an FSDP model is checked against :func:`model_for_checks`).
        cfg: the run's config; remote files are not checked.
        opened: what :func:`set_resume` read (else the file is read here).

    Raises:
        StartCheckpointError: the weights do not fit.

    Resuming is strict; ``load_from`` refuses only other shapes unless the model declares ``class_set_weights``.
    """
    path = cfg.get('load_from')
    if not path or '://' in str(path):
        return
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    if not isinstance(model, torch.nn.Module) or isinstance(model, (FullyShardedDataParallel, FSDPModule)):
        model = model_for_checks(cfg)
    how = '--resume' if cfg.get('resume') else 'load_from'
    try:
        state_dict = unwrap_state_dict(opened.checkpoint) if opened is not None else load_state_dict_file(path)
        class_set = () if cfg.get('resume') else getattr(model, 'class_set_weights', ())
        check_weights_match(model, state_dict, f'{path} ({how})', strict=bool(cfg.get('resume') or class_set),
                            may_lack=class_set)
    except (FileNotFoundError, CheckpointFileError, CheckpointMismatchError) as error:
        raise StartCheckpointError(f'train: {error}') from None
    if opened is not None:
        give_to_runner(runner, opened)


def model_for_checks(cfg: Config) -> torch.nn.Module:
    """``cfg.model`` built without ``init_weights``, for its weights' names and shapes."""
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    return MODELS.build(cfg.model)
