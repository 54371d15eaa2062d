"""Train a model from a config (the CLI of mmseg 1.2.2's ``tools/train.py``, with ``--resume [CKPT]``).

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp] [--tensorboard] [--cfg-options k=v ...]
                                 [--launcher {none,pytorch,slurm,mpi}]
    bash tools/dist_train.sh CONFIG GPUS [args]          # torchrun, also on CPU (gloo)

- ``--resume``: without a value, resume from the latest checkpoint in the work dir (a new run when there is none);
  with a path, from that file.
- ``--amp``: ``optim_wrapper.type='beit_mm.AmpOptimWrapper'`` with ``dtype='bfloat16'`` where supported (CPU, or a
  CUDA device with ``torch.cuda.is_bf16_supported()``), else ``'float16'`` with ``loss_scale='dynamic'``.
- SyncBN rule: configs use ``norm_cfg=dict(type='SyncBN')``. A single-process run gets BN because MMEngine's Runner
  reverts SyncBN when not distributed; a distributed run without CUDA gets BN, the gloo backend and a CPU DDP wrapper
  from :func:`beit_mm.engine.launch.adapt_cfg_to_launcher`; distributed GPU runs keep SyncBN.

Importing ``beit_mm`` registers the plugin's modules and allow-lists MMEngine checkpoint types for torch >= 2.6's
``weights_only`` loading (``beit_mm.engine.checkpoint``).
"""
import argparse
import logging
import os
import os.path as osp

import torch
from mmengine.config import Config, DictAction
from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import Runner, find_latest_checkpoint

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.engine.launch import adapt_cfg_to_launcher, init_cpu_process_group


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model with beit_mm')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models (default: work_dirs/<config stem>)')
    parser.add_argument(
        '--resume',
        nargs='?',
        const='auto',
        default=None,
        metavar='CKPT',
        help='resume training: without a value from the latest checkpoint in the work dir, else from CKPT')
    parser.add_argument('--amp', action='store_true', help='enable automatic mixed precision training')
    parser.add_argument('--tensorboard', action='store_true',
                        help='also log scalars (losses, lr, metrics) to TensorBoard: <work_dir>/<timestamp>/vis_data')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value pairs, e.g. train_cfg.max_iters=100')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16; read from /proc/cpuinfo on Linux)."""
    try:
        with open('/proc/cpuinfo') as f:
            flags = f.read()
    except OSError:
        return False
    return 'avx512_bf16' in flags or 'amx_bf16' in flags


def amp_settings() -> dict:
    """``optim_wrapper`` fields for ``--amp`` on this device: bf16 where supported, else fp16 + dynamic loss scale.

    CPUs run bf16 only (fp16 autocast on CPU is not supported by the wrapper); without AVX512-BF16/AMX it is emulated
    and usually slower than fp32, which is logged."""
    if torch.cuda.is_available():
        if not torch.cuda.is_bf16_supported():
            return dict(type='beit_mm.AmpOptimWrapper', dtype='float16', loss_scale='dynamic')
    elif not cpu_has_native_bf16():
        print_log('--amp on a CPU without AVX512-BF16/AMX: bf16 is emulated there and usually slower than fp32',
                  logger='current', level=logging.WARNING)
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
    cfg.optim_wrapper.update(settings)
    print_log(f'--amp: optim_wrapper {settings}', logger='current')


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


def set_resume(cfg: Config, resume: str) -> None:
    """``--resume CKPT``: resume from CKPT. ``--resume`` (``'auto'``): resume from ``work_dir/last_checkpoint`` when
    it exists, else start as configured (keeping a pretrained ``load_from``, which MMEngine's own auto-resume drops).
    """
    if resume != 'auto':
        cfg.resume, cfg.load_from = True, resume
        return
    latest = find_latest_checkpoint(cfg.work_dir)
    if latest is None:
        print_log(f'--resume: no checkpoint in {cfg.work_dir}, starting a new run', logger='current',
                  level=logging.WARNING)
        return
    cfg.resume, cfg.load_from = True, latest


def main() -> None:
    args = parse_args()
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    if args.amp:
        enable_amp(cfg)
    if args.tensorboard:
        enable_tensorboard(cfg)
    if args.resume is not None:
        set_resume(cfg, args.resume)
    adapt_cfg_to_launcher(cfg, args.launcher)
    init_cpu_process_group(args.launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.train()


if __name__ == '__main__':
    main()
