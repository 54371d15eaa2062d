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
from ..launch import is_rank_zero
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
    """``--resume CKPT``: resume from CKPT. ``--resume`` (``'auto'``): resume from the last complete checkpoint of the
    work dir (``last_checkpoint``, or the newest complete ``iter_N.pth`` when that file is missing or truncated:
    :func:`beit_mm.fileio.work_dir.find_last_complete_checkpoint`), else start as configured (keeping a pretrained
    ``load_from``, which MMEngine's own auto-resume drops).

    The checkpoint is opened first (:func:`check_resumable`): a missing, truncated or foreign
    file, a state dict without training state, or an ``--ema`` run resumed without ``--ema`` stop here, before
    anything is built. ``how`` names the request in messages (``--resume``, or the config's ``resume=True``). Returns
    the opened checkpoint (None for a new run), which :func:`check_start_checkpoint` checks and gives to the runner's
    load: the file is read once.

    Raises:
        StartCheckpointError: ``<how>: <the file's problem and the fix>``.
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


def check_start_checkpoint(runner, cfg: Config, opened: OpenedCheckpoint | None = None) -> None:
    """Before training: the ``--resume``/``load_from`` checkpoint fits the model, as a named error listing the keys and
    shapes that do not (:func:`beit_mm.models.builder.check_weights_match`; resuming is strict, ``load_from`` only
    refuses other shapes, MMEngine then names the keys it ignores, except for a model that declares
    ``class_set_weights`` (EoMT): its ``load_from`` must hold every weight but those, which keep their init). Without
    it, other shapes leave weights random or, resumed into a fused optimizer, corrupt memory. ``opened``: the
    checkpoint :func:`set_resume` already read (else the file is read here), then given to ``runner``'s load
    (:func:`beit_mm.engine.resume.opened.give_to_runner`: read once). Where the runner builds its model only in
    ``train()`` (MMEngine's ``FlexibleRunner``, the FSDP path of BEiT-L), the check runs on the config's model built
    for it (:func:`model_for_checks`). Skipped for remote files.

    Raises:
        StartCheckpointError: ``train: <the keys and shapes that do not fit, and the fix>``.
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
