"""Training from a config: everything prepared before and around MMEngine's ``Runner.train``."""
from __future__ import annotations

import os.path as osp

from mmengine.config import Config

from ..data.checks import DatasetCheckError, check_split_folders, config_data_roots
from ..engine.hooks.atomic_checkpoint import use_atomic_checkpoint_hook
from ..engine.hooks.batch_norm_sync import use_batch_norm_sync_hook
from ..engine.hooks.compile import use_compile_hook
from ..engine.hooks.ema import enable_ema
from ..engine.runner import build_runner, release_dataloader_workers
from ..engine.launch import adapt_cfg_to_launcher, destroy_process_group, init_cpu_process_group, is_rank_zero
from ..engine.resume import StartCheckpointError, TrainingStateError, check_start_checkpoint, prepare_start
from ..engine.run_options import enable_amp, enable_tensorboard, use_cudnn_deterministic, use_fused_adamw
from ..fileio.outputs import OutputError
from ..fileio.work_dir import (WorkDirInUseError, check_config_dump, check_new_run_work_dir, check_work_dir,
                               record_config_dump)
from .pretrained import MissingPretrainedError, check_pretrained_files


class TrainingRefused(Exception):
    """A run refused before or during training; the message names the problem and the fix (a tool exits with
    :func:`beit_mm.fileio.names.refusal`)."""


def train(config: str, *, work_dir: str | None = None, resume: str | None = None,
          resume_schedule_in_samples: bool = False, overwrite: bool = False, amp: bool = False, ema: bool = False,
          tensorboard: bool = False, compile: str | None = None, cfg_options: dict | None = None,
          launcher: str = 'none') -> None:
    """Train the model of the config file ``config`` in this process.

    Args:
        config: the config file.
        work_dir: where logs and checkpoints go (default: the config's ``work_dir``, else ``work_dirs/<stem>``).
        resume: None (a new run unless the config resumes), ``'auto'`` or a checkpoint path.
        resume_schedule_in_samples: resume a checkpoint of another global batch with the schedule in images seen.
        overwrite: start a new run in a work dir holding another run's checkpoints (or resume into it from outside).
        amp, ema, tensorboard: mixed precision, an EMA of the weights, TensorBoard scalars.
        compile: a ``torch.compile`` backend, or None for the config's ``compile`` setting.
        cfg_options: config overrides (``{'train_cfg.max_iters': 100}``).
        launcher: ``'none'``, ``'pytorch'``, ``'slurm'`` or ``'mpi'``.

    Raises:
        TrainingRefused: a work dir, checkpoint, pretrained file, dataset or training state that cannot be used.
    """
    cfg = Config.fromfile(config)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config))[0])
    how = '--resume'
    if resume is None and cfg.get('resume'):
        resume, how = cfg.get('load_from') or 'auto', f'resume=True (load_from={cfg.get("load_from")})'
    try:
        check_new_run_work_dir(cfg.work_dir, resume, overwrite)
        check_work_dir(cfg.work_dir, inputs=[config, *config_data_roots(cfg)])
        check_config_dump(cfg.work_dir, config)
    except (WorkDirInUseError, OutputError) as error:
        raise TrainingRefused(str(error)) from None
    if amp:
        enable_amp(cfg)
    use_fused_adamw(cfg)
    if ema:
        enable_ema(cfg)
    use_compile_hook(cfg, compile)
    if tensorboard:
        enable_tensorboard(cfg)
    use_atomic_checkpoint_hook(cfg)
    try:
        opened = prepare_start(cfg, resume, how, resume_schedule_in_samples)
    except StartCheckpointError as error:
        raise TrainingRefused(str(error)) from None
    except TrainingStateError as error:
        raise TrainingRefused(str(error)) from None
    try:
        check_pretrained_files(cfg, config)
        check_split_folders(cfg)
    except (MissingPretrainedError, DatasetCheckError) as error:
        raise TrainingRefused(str(error)) from None
    adapt_cfg_to_launcher(cfg, launcher)
    use_batch_norm_sync_hook(cfg)
    use_cudnn_deterministic(cfg)
    init_cpu_process_group(launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = build_runner(cfg)
    if is_rank_zero():
        record_config_dump(cfg.work_dir, config)
    try:
        check_start_checkpoint(runner, cfg, opened)
    except StartCheckpointError as error:
        raise TrainingRefused(str(error)) from None
    del opened  # the runner's load holds it until it takes it
    try:
        runner.train()
    except TrainingStateError as error:
        raise TrainingRefused(str(error)) from None
    finally:
        release_dataloader_workers(runner)
    del runner  # it holds the process group: free it before destroying the group
    destroy_process_group()
