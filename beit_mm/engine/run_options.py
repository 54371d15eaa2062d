"""Config edits for the run flags: ``--amp``, fused AdamW, ``--tensorboard`` and ``env_cfg.cudnn_deterministic``."""
from __future__ import annotations

import logging

import torch
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import OPTIMIZERS
from torch.optim import AdamW

from ..registry import config_type_is
from .amp_optim_wrapper import amp_dtype_for_device, fused_adamw_supported


def train_device_type() -> str:
    """``'cuda'`` where CUDA is available, else ``'cpu'``."""
    return 'cuda' if torch.cuda.is_available() else 'cpu'


def amp_settings() -> dict | None:
    """``optim_wrapper`` fields for ``--amp`` on this device, or None where mixed precision would be slower."""
    dtype = amp_dtype_for_device(train_device_type())
    if dtype is None:
        return None
    if dtype == torch.float16:
        return dict(type='beit_mm.AmpOptimWrapper', dtype='float16', loss_scale='dynamic')
    return dict(type='beit_mm.AmpOptimWrapper', dtype='bfloat16')


def enable_amp(cfg: Config) -> None:
    """Switch ``cfg.optim_wrapper`` to mixed precision (:func:`amp_settings`), or say why it stays fp32.

    Raises:
        ValueError: the config's optim wrapper is neither a plain ``OptimWrapper`` nor already an AMP one.
    """
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
    """Set ``optimizer.fused=True`` for AdamW where the device has a fused kernel, unless ``fused``/``foreach`` set."""
    optimizer = cfg.get('optim_wrapper', {}).get('optimizer')
    if not optimizer or not config_type_is(optimizer.get('type'), AdamW, OPTIMIZERS):
        return
    if 'fused' in optimizer or 'foreach' in optimizer or not fused_adamw_supported(train_device_type()):
        return
    optimizer['fused'] = True
    print_log(f'AdamW: fused=True on {train_device_type()}', logger='current')


def enable_tensorboard(cfg: Config) -> None:
    """Append MMEngine's ``TensorboardVisBackend`` to ``cfg.visualizer.vis_backends``."""
    if cfg.get('visualizer') is None:
        cfg.visualizer = dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')], name='visualizer')
    backends = list(cfg.visualizer.get('vis_backends') or [])
    if not any(b.get('type', '').split('.')[-1] == 'TensorboardVisBackend' for b in backends):
        backends.append(dict(type='TensorboardVisBackend'))
    cfg.visualizer.vis_backends = backends


def use_cudnn_deterministic(cfg: Config) -> None:
    """Consume ``env_cfg.cudnn_deterministic``: when True, ``torch.backends.cudnn.deterministic = True``.

    MMEngine's ``randomness.deterministic`` raises in UPerNet's CUDA backward; FlexibleRunner refuses unknown keys.
    """
    env_cfg = cfg.get('env_cfg') or {}
    if env_cfg.pop('cudnn_deterministic', False):
        torch.backends.cudnn.deterministic = True
