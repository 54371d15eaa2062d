"""The checkpoint a run starts from: which file ``--resume`` means, opened once and checked (training state, EMA,
weights against the model) before anything trains, then handed to the run's load.

A wrong file stops the run with :class:`StartCheckpointError` naming the request (``--resume``, the config's
``resume=True``, ``load_from``), the file, the problem and the fix.
"""
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


def set_resume(cfg: Config, resume: str, how: str = '--resume') -> OpenedCheckpoint | None:
    """Open the checkpoint a run resumes from, before anything is built.

    Args:
        cfg: the run's config; ``resume``/``load_from`` are set for MMEngine (``resume=False`` when nothing is found).
        resume: a checkpoint path, or ``'auto'``: the work dir's last complete checkpoint
            (:func:`beit_mm.fileio.work_dir.find_last_complete_checkpoint`), else a new run keeping ``load_from``.
        how: the request, for messages (``--resume``, the config's ``resume=True``).

    Returns:
        The opened checkpoint (None for a new run), for :func:`check_start_checkpoint`: the file is read once.

    Raises:
        StartCheckpointError: ``<how>: <the file's problem and the fix>`` (:func:`check_resumable`).
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
    """Open the start checkpoint (:func:`set_resume`, when ``resume`` is given) and add the resume guard
    (``beit_mm.CheckpointGuardHook``) and the RNG-state hook, seeded from the checkpoint.

    Args:
        cfg: the run's config, edited in place.
        resume: as :func:`set_resume`; None for a new run (unless the config resumes).
        how: the request, for messages.
        schedule_in_samples: resume another global batch with the schedule counted in images seen.

    Returns:
        The opened checkpoint or None, for :func:`check_start_checkpoint` once the runner is built.

    Raises:
        StartCheckpointError: the file cannot start the run.
        TrainingStateError: its seed is not one numpy accepts.
    """
    opened = set_resume(cfg, resume, how) if resume is not None else None
    use_checkpoint_guard_hook(cfg, schedule_in_samples=schedule_in_samples)
    use_rng_state_hook(cfg, opened.checkpoint if opened is not None else None)
    return opened


def check_start_checkpoint(runner, cfg: Config, opened: OpenedCheckpoint | None = None) -> None:
    """Check that the ``--resume``/``load_from`` checkpoint fits the model, then give it to ``runner``'s load.

    Args:
        runner: the built runner. A ``FlexibleRunner`` that builds its model only in ``train()`` (FSDP) is checked
            against :func:`model_for_checks`.
        cfg: the run's config (``load_from``, ``resume``); remote files are not checked.
        opened: what :func:`set_resume` read (else the file is read here).

    Raises:
        StartCheckpointError: ``train: <the keys and shapes that do not fit, and the fix>``.

    Resuming is strict; ``load_from`` refuses only other shapes, except for a model declaring ``class_set_weights``
    (EoMT), whose start must hold every weight but those.
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
        # a model that declares its class-set weights (EoMT) starts from load_from strictly but for those
        class_set = () if cfg.get('resume') else getattr(model, 'class_set_weights', ())
        check_weights_match(model, state_dict, f'{path} ({how})', strict=bool(cfg.get('resume') or class_set),
                            may_lack=class_set)
    except (FileNotFoundError, CheckpointFileError, CheckpointMismatchError) as error:
        raise StartCheckpointError(f'train: {error}') from None
    if opened is not None:
        give_to_runner(runner, opened)


def model_for_checks(cfg: Config) -> torch.nn.Module:
    """``cfg.model`` built for its weights' names, shapes and dtypes (no ``init_weights``, nothing loaded); what the
    FlexibleRunner builds anyway before it wraps and shards the model, freed after the check."""
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    return MODELS.build(cfg.model)
