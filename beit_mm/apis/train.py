"""Training from a config: everything ``tools/train.py`` prepares before and around MMEngine's ``Runner.train``.

:func:`train` is the entry point (``tools/train.py`` is its argparse front, one flag per keyword): the work-dir checks,
``--amp``, fused AdamW, ``--ema``, ``--compile``, ``--tensorboard``, ``--resume`` (the checkpoint opened once and
checked before anything is built), the pretrained-file and dataset checks, the guard/RNG/atomic-checkpoint hooks,
cuDNN determinism, the launcher and process group, FSDP handling and the config dump record. A run refused before or
during training raises :class:`TrainingRefused` with one line naming the problem and the fix.
"""
from __future__ import annotations

import logging
import os
import os.path as osp

import torch
from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import OPTIMIZERS, RUNNERS
from mmengine.runner import Runner

from ..data.checks import DatasetCheckError, check_split_folders, config_data_roots
from ..engine.amp_optim_wrapper import amp_dtype_for_device, fused_adamw_supported
from ..engine.hooks.atomic_checkpoint import use_atomic_checkpoint_hook
from ..engine.hooks.checkpoint_guard import use_checkpoint_guard_hook
from ..engine.hooks.compile import use_compile_hook
from ..engine.hooks.rng_state import use_rng_state_hook
from ..engine.launch import adapt_cfg_to_launcher, destroy_process_group, init_cpu_process_group
from ..engine.resume import TrainingStateError
from ..fileio import CheckpointFileError, load_state_dict_file, unwrap_state_dict
from ..fileio.checkpoint import hand_over
from ..fileio.outputs import OutputError
from ..fileio.work_dir import (WorkDirInUseError, check_config_dump, check_new_run_work_dir, check_work_dir,
                               find_last_complete_checkpoint, record_config_dump)
from ..registry import config_type_is
from .checkpoint import CheckpointMismatchError, check_resumable, check_weights_match
from .pretrained import MissingPretrainedError, check_pretrained_files


class TrainingRefused(Exception):
    """A run refused before or during training; the message names the problem and the fix. ``exit_status``: what
    ``tools/train.py`` exits with (2: ``train.py: error: <message>``; 1: the message alone, the resume checks)."""

    def __init__(self, message: str, exit_status: int = 2) -> None:
        super().__init__(message)
        self.exit_status = exit_status


# --ema without an ``ema_cfg`` in the config. unilm beit/run_class_finetuning.py: ``--model_ema_decay`` default 0.9999,
# ``ModelEma.update(model)`` after every optimizer step (timm ModelEma: ema = decay * ema + (1 - decay) * weights);
# MMEngine's ExponentialMovingAverage: ema = (1 - momentum) * ema + momentum * weights, so momentum = 1 - decay.
# mmpretrain 1.2.0 configs/convnext/convnext-base_32xb128_in1k.py line 18: EMAHook momentum=1e-4, priority
# 'ABOVE_NORMAL' (vision_transformer/vit-base-p16_32xb128-mae_in1k.py line 53: 1e-4), so that the EMA weights are
# swapped in before validation and checkpoint hooks run. Buffers (BatchNorm statistics) are copied, not averaged
# (MMEngine's default, update_buffers=False).
EMA_DEFAULTS = dict(type='EMAHook', ema_type='ExponentialMovingAverage', momentum=1e-4, update_buffers=False,
                    priority='ABOVE_NORMAL')


def train_device_type() -> str:
    return 'cuda' if torch.cuda.is_available() else 'cpu'


def amp_settings() -> dict | None:
    """``optim_wrapper`` fields for ``--amp`` on this device, or None where mixed precision would be slower.

    bf16 on GPUs that support it and CPUs with AVX512-BF16/AMX; fp16 + dynamic loss scaling on older GPUs; None on
    CPUs without native bf16 (see :func:`beit_mm.engine.amp_optim_wrapper.amp_dtype_for_device`)."""
    dtype = amp_dtype_for_device(train_device_type())
    if dtype is None:
        return None
    if dtype == torch.float16:
        return dict(type='beit_mm.AmpOptimWrapper', dtype='float16', loss_scale='dynamic')
    return dict(type='beit_mm.AmpOptimWrapper', dtype='bfloat16')


def enable_amp(cfg: Config) -> None:
    """Switch ``cfg.optim_wrapper`` to mixed precision (see :func:`amp_settings`)."""
    wrapper_type = cfg.optim_wrapper.get('type', 'OptimWrapper')
    if wrapper_type in ('AmpOptimWrapper', 'beit_mm.AmpOptimWrapper', 'mmengine.AmpOptimWrapper'):
        print_log('AMP training is already enabled in your config.', logger='current', level=logging.WARNING)
        return
    if wrapper_type not in ('OptimWrapper', 'mmengine.OptimWrapper'):
        raise ValueError(f'--amp needs optim_wrapper.type OptimWrapper, got {wrapper_type!r}: set optim_wrapper.type '
                         "in the config to 'beit_mm.AmpOptimWrapper' yourself instead of passing --amp.")
    settings = amp_settings()
    if settings is None:
        print_log('--amp: this CPU has no native bf16 (AVX512-BF16/AMX), where bf16 is emulated and ~70x slower; '
                  'training in fp32', logger='current', level=logging.WARNING)
        return
    cfg.optim_wrapper.update(settings)
    print_log(f'--amp: optim_wrapper {settings}', logger='current')


def use_fused_adamw(cfg: Config) -> None:
    """``optimizer.fused=True`` for AdamW where torch has a fused kernel for the device, unless the config chose."""
    optimizer = cfg.get('optim_wrapper', {}).get('optimizer')
    if not optimizer or not config_type_is(optimizer.get('type'), torch.optim.AdamW, OPTIMIZERS):
        return
    if 'fused' in optimizer or 'foreach' in optimizer or not fused_adamw_supported(train_device_type()):
        return
    optimizer['fused'] = True
    print_log(f'AdamW: fused=True on {train_device_type()}', logger='current')


def enable_tensorboard(cfg: Config) -> None:
    """``--tensorboard``: append MMEngine's ``TensorboardVisBackend`` to ``cfg.visualizer.vis_backends`` (a plain
    ``Visualizer`` with a ``LocalVisBackend`` when the config has none). Whatever the LoggerHook logs (losses, lr,
    validation metrics) then lands in ``<work_dir>/<timestamp>/vis_data/events.out.tfevents.*``."""
    backend = dict(type='TensorboardVisBackend')
    if cfg.get('visualizer') is None:
        cfg.visualizer = dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')], name='visualizer')
    backends = list(cfg.visualizer.get('vis_backends') or [])
    if not any(b.get('type', '').split('.')[-1] == 'TensorboardVisBackend' for b in backends):
        backends.append(backend)
    cfg.visualizer.vis_backends = backends


def enable_ema(cfg: Config) -> None:
    """``--ema``: append MMEngine's ``EMAHook`` (``cfg.ema_cfg`` or :data:`EMA_DEFAULTS`) to ``cfg.custom_hooks``,
    unless the config already has one."""
    hooks = list(cfg.get('custom_hooks') or [])
    if any(str(h.get('type', '')).split('.')[-1] == 'EMAHook' for h in hooks):
        print_log('--ema: the config already has an EMAHook in custom_hooks', logger='current', level=logging.WARNING)
        return
    ema = dict(cfg.get('ema_cfg') or EMA_DEFAULTS)
    if str(ema.get('type', '')).split('.')[-1] != 'EMAHook':
        raise ValueError(f"ema_cfg must be an EMAHook config (type='EMAHook', momentum=...), got {ema}")
    hooks.append(ema)
    cfg.custom_hooks = hooks
    print_log(f'--ema: custom_hooks += {ema}', logger='current')


def set_resume(cfg: Config, resume: str, how: str = '--resume') -> dict | None:
    """``--resume CKPT``: resume from CKPT. ``--resume`` (``'auto'``): resume from the last complete checkpoint of the
    work dir (``last_checkpoint``, or the newest complete ``iter_N.pth`` when that file is missing or truncated:
    :func:`beit_mm.fileio.work_dir.find_last_complete_checkpoint`), else start as configured (keeping a pretrained
    ``load_from``, which MMEngine's own auto-resume drops).

    The checkpoint is opened first (:func:`beit_mm.apis.checkpoint.check_resumable`): a missing, truncated or foreign
    file, a state dict without training state, or an ``--ema`` run resumed without ``--ema`` stop here with a named
    message, before anything is built. The config source the checkpoint stores is never run (``beit_mm.apis``).
    ``how`` names the request in messages (``--resume``, or the config's ``resume=True``). Returns the opened
    checkpoint (None for a new run), which :func:`check_start_checkpoint` checks and MMEngine's load then takes over
    (:func:`beit_mm.fileio.checkpoint.hand_over`): the file is read once.
    """
    if resume == 'auto':
        resume = find_last_complete_checkpoint(cfg.work_dir)
        if resume is None:
            if is_rank_zero():
                print_log(f'{how}: no checkpoint in {cfg.work_dir}, starting a new run', logger='current',
                          level=logging.WARNING)
            cfg.resume = False  # else MMEngine's own auto-resume follows last_checkpoint unchecked
            return None
    with_ema = any(str(h.get('type', '')).split('.')[-1] == 'EMAHook' for h in cfg.get('custom_hooks') or [])
    try:
        opened = check_resumable(resume, with_ema)
    except (FileNotFoundError, CheckpointFileError) as error:
        stop(f'{how}: {error}')
    cfg.resume, cfg.load_from = True, resume
    return opened


def check_start_checkpoint(runner: Runner, cfg: Config, opened: dict | None = None) -> None:
    """Before training: the ``--resume``/``load_from`` checkpoint fits the model, as a named error listing the keys and
    shapes that do not (:func:`beit_mm.apis.checkpoint.check_weights_match`; resuming is strict, ``load_from`` only
    refuses other shapes, MMEngine then names the keys it ignores, except for a model that declares
    ``class_set_weights`` (EoMT): its ``load_from`` must hold every weight but those, which keep their init). Without
    it, other shapes leave weights random or, resumed into a fused optimizer, corrupt memory. ``opened``: the
    checkpoint :func:`set_resume` already read (else the file is read here). Where the runner builds its model only in
    ``train()`` (MMEngine's ``FlexibleRunner``, the FSDP path of BEiT-L), the check runs on the config's model built
    for it (:func:`model_for_checks`). Skipped for remote files. The checkpoint is then handed to MMEngine's load (read
    once)."""
    path = cfg.get('load_from')
    if not path or '://' in str(path):
        return
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    if not isinstance(model, torch.nn.Module) or isinstance(model, (FullyShardedDataParallel, FSDPModule)):
        model = model_for_checks(cfg)
    how = '--resume' if cfg.get('resume') else 'load_from'
    try:
        state_dict = unwrap_state_dict(opened) if opened is not None else load_state_dict_file(path)
        # a model that declares its class-set weights (EoMT) starts from load_from strictly but for those
        class_set = () if cfg.get('resume') else getattr(model, 'class_set_weights', ())
        check_weights_match(model, state_dict, f'{path} ({how})', strict=bool(cfg.get('resume') or class_set),
                            may_lack=class_set)
    except (FileNotFoundError, CheckpointFileError, CheckpointMismatchError) as error:
        stop(f'train: {error}')
    if opened is not None:
        hand_over(path, opened)


def model_for_checks(cfg: Config) -> torch.nn.Module:
    """``cfg.model`` built for its weights' names, shapes and dtypes (no ``init_weights``, nothing loaded); what the
    FlexibleRunner builds anyway before it wraps and shards the model, freed after the check."""
    from mmengine.registry import MODELS, init_default_scope
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    return MODELS.build(cfg.model)


def use_cudnn_deterministic(cfg: Config) -> None:
    """``env_cfg.cudnn_deterministic=True`` (the BEiT ADE20K configs): ``torch.backends.cudnn.deterministic = True``,
    what unilm's ``--deterministic`` sets (mmseg 0.x ``set_random_seed``), without MMEngine's
    ``randomness.deterministic``, which also calls ``torch.use_deterministic_algorithms(True)``: that raises on CUDA in
    the backward of ``AdaptiveAvgPool2d`` and of bilinear ``interpolate`` (torch 2.13's list), both in UPerNet."""
    env_cfg = cfg.get('env_cfg') or {}
    if env_cfg.pop('cudnn_deterministic', False):  # consumed here: FlexibleRunner's strategies refuse unknown keys
        torch.backends.cudnn.deterministic = True


def is_rank_zero() -> bool:
    """Whether this process speaks for the run: rank 0 of a launched run (torchrun/slurm set ``RANK`` before any
    process group exists), or a single process."""
    return os.environ.get('RANK', '0') == '0'


def stop(message: str) -> None:
    """Refuse the run with ``message`` (today's ``SystemExit(message)``: printed as it is, exit status 1)."""
    raise TrainingRefused(message, exit_status=1) from None


def refuse(error: Exception) -> None:
    """Refuse the run with the named ``error`` (``train.py: error: <error>``, exit status 2)."""
    raise TrainingRefused(str(error)) from None


def train(config: str, *, work_dir: str | None = None, resume: str | None = None,
          resume_schedule_in_samples: bool = False, overwrite: bool = False, amp: bool = False, ema: bool = False,
          tensorboard: bool = False, compile: str | None = None, cfg_options: dict | None = None,
          launcher: str = 'none') -> None:
    """Train the model of the config file ``config`` in this process (``tools/train.py``'s flags as keywords).

    Args:
        config: the config file.
        work_dir: where logs and checkpoints go (default: the config's ``work_dir``, else ``work_dirs/<stem>``).
        resume: None (a new run, unless the config says ``resume=True``), ``'auto'`` (the last complete checkpoint of
            the work dir, a new run when there is none) or a checkpoint path.
        resume_schedule_in_samples: resume a checkpoint of another global batch with the schedule in images seen.
        overwrite: start a new run in a work dir holding another run's checkpoints (or resume into it from outside).
        amp, ema, tensorboard: mixed precision, an EMA of the weights, TensorBoard scalars.
        compile: a ``torch.compile`` backend, or None for the config's ``compile`` setting.
        cfg_options: config overrides (``{'train_cfg.max_iters': 100}``).
        launcher: ``'none'``, ``'pytorch'``, ``'slurm'`` or ``'mpi'``.

    Raises:
        TrainingRefused: a work dir, checkpoint, pretrained file, dataset or resumed training state that cannot be
            used; the message names it and the fix.
    """
    cfg = Config.fromfile(config)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config))[0])
    how = '--resume'
    if resume is None and cfg.get('resume'):  # resume=True in the config: the checks of --resume [load_from]
        resume, how = cfg.get('load_from') or 'auto', f'resume=True (load_from={cfg.get("load_from")})'
    try:  # another run's checkpoints: refused before anything is built (beit_mm.fileio.work_dir)
        check_new_run_work_dir(cfg.work_dir, resume, overwrite)
        # tools/test.py's check: not in a dataset root or an input, not a link, a file or unwritable
        check_work_dir(cfg.work_dir, inputs=[config, *config_data_roots(cfg)])
        check_config_dump(cfg.work_dir, config)  # MMEngine's config dump over a file no beit_mm run wrote
    except (WorkDirInUseError, OutputError) as error:
        refuse(error)
    if amp:
        enable_amp(cfg)
    use_fused_adamw(cfg)
    if ema:
        enable_ema(cfg)
    use_compile_hook(cfg, compile)  # the config's compile setting, or --compile's
    if tensorboard:
        enable_tensorboard(cfg)
    opened = set_resume(cfg, resume, how) if resume is not None else None
    try:
        check_pretrained_files(cfg, config)  # converted official weights: named with source and converter command
        check_split_folders(cfg)  # a missing or empty image folder: a named error before the datasets are built
    except (MissingPretrainedError, DatasetCheckError) as error:
        refuse(error)
    use_atomic_checkpoint_hook(cfg)  # checkpoints survive a kill at any moment (beit_mm.AtomicCheckpointHook)
    # a resumed checkpoint's training state and batch are checked before MMEngine uses it
    use_checkpoint_guard_hook(cfg, schedule_in_samples=resume_schedule_in_samples)
    try:
        use_rng_state_hook(cfg, opened)  # checkpoints carry every process's RNG states; --resume restores them, the seed
    except TrainingStateError as error:  # a seed numpy refuses
        refuse(error)
    adapt_cfg_to_launcher(cfg, launcher)
    use_cudnn_deterministic(cfg)
    init_cpu_process_group(launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    if is_rank_zero():  # the config dump (rank 0 writes it) is this run's: a later run may replace it
        record_config_dump(cfg.work_dir, config)
    check_start_checkpoint(runner, cfg, opened)
    del opened  # held by the hand-over until MMEngine's load takes it
    try:
        runner.train()
    except TrainingStateError as error:  # CheckpointGuardHook, before Runner.resume uses the checkpoint
        refuse(error)
    del runner  # it holds the DDP wrapper, which holds the process group: free both first (beit_mm.engine.launch)
    destroy_process_group()
