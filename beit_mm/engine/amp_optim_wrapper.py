"""Mixed precision on CUDA and CPU: the optimizer wrapper and the autocast dtype each device trains in.

MMEngine's ``AmpOptimWrapper`` asserts CUDA and builds ``torch.cuda.amp.GradScaler``; this subclass builds
``torch.amp.GradScaler(<device>)``, disabled for bfloat16, refuses float16 on CPU and resolves ``dtype='auto'``.
"""
import logging
import os
from contextlib import contextmanager
from typing import Optional, Union

import torch
from mmengine.device import get_device
from mmengine.logging import print_log
from mmengine.optim import AmpOptimWrapper as MMEngineAmpOptimWrapper
from mmengine.optim import OptimWrapper

from ..registry import OPTIM_WRAPPERS

NATIVE_BF16_CPU_FLAGS = ('avx512_bf16', 'amx_bf16')


EMULATE_AVX2_ENV = 'BEIT_MM_EMULATE_AVX2'


def cpu_native_bf16_flags() -> tuple[str, ...]:
    """Which of :data:`NATIVE_BF16_CPU_FLAGS` this CPU has; () elsewhere or under ``BEIT_MM_EMULATE_AVX2=1``."""
    if os.environ.get(EMULATE_AVX2_ENV, '0') not in ('', '0'):
        return ()
    try:
        with open('/proc/cpuinfo') as f:
            flags = set(f.read().split())
    except OSError:
        return ()
    return tuple(flag for flag in NATIVE_BF16_CPU_FLAGS if flag in flags)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (emulated bf16 trains about 70x slower than fp32 on AVX2)."""
    return bool(cpu_native_bf16_flags())


def describe_cpu() -> str:
    """This CPU in one line: model, threads, native bf16 or not, ATen's kernel level."""
    model = 'CPU'
    try:
        with open('/proc/cpuinfo') as f:
            model = next((ln.split(':', 1)[1].strip() for ln in f if ln.startswith('model name')), model)
    except OSError:
        pass
    flags = cpu_native_bf16_flags()
    bf16 = f'native bf16 ({", ".join(flags)})' if flags else 'no native bf16 (no avx512_bf16 / amx_bf16)'
    emulated = ' (AVX2 emulated)' if os.environ.get(EMULATE_AVX2_ENV, '0') not in ('', '0') else ''
    return (f'{model}, {torch.get_num_threads()} threads, {bf16}, ATen {torch.backends.cpu.get_cpu_capability()}'
            f'{emulated}')


def amp_dtype_for_device(device_type: str) -> Optional[torch.dtype]:
    """The autocast dtype that trains faster on this device (bf16 where native, else fp16 on CUDA), or None."""
    if device_type == 'cuda':
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device_type == 'cpu':
        return torch.bfloat16 if cpu_has_native_bf16() else None
    return torch.get_autocast_dtype(device_type)


def fused_adamw_supported(device_type: str) -> bool:
    """Whether ``torch.optim.AdamW(fused=True)`` runs on this device type."""
    return device_type in torch.utils._foreach_utils._get_fused_kernels_supported_devices()


AUTO_DTYPE = 'auto'


def resolve_amp_dtype(dtype: Optional[Union[str, torch.dtype]], device_type: str) -> Optional[torch.dtype]:
    """The autocast dtype ``dtype`` (``'auto'``: :func:`amp_dtype_for_device`; None: the device's default) means on
    ``device_type``; None = no autocast."""
    if isinstance(dtype, str):
        if dtype == AUTO_DTYPE:
            return amp_dtype_for_device(device_type)
        if dtype not in AmpOptimWrapper.valid_dtypes:
            raise ValueError(f"dtype must be 'auto' or one of {AmpOptimWrapper.valid_dtypes}, got {dtype!r}")
        return getattr(torch, dtype)
    if dtype is None:
        return torch.bfloat16 if device_type == 'cpu' else torch.get_autocast_dtype(device_type)
    return dtype


@OPTIM_WRAPPERS.register_module()
class AmpOptimWrapper(MMEngineAmpOptimWrapper):
    """``mmengine.optim.AmpOptimWrapper`` for CUDA and CPU.

    Args:
        loss_scale (float | str | dict): ``'dynamic'``, a static initial scale, or ``torch.amp.GradScaler`` kwargs;
            used for float16 only.
        dtype (str | torch.dtype, optional): ``'auto'``, ``'float16'``, ``'bfloat16'`` or a dtype
            (:func:`resolve_amp_dtype`); the result is ``cast_dtype`` (None: fp32).
        **kwargs: ``OptimWrapper`` arguments (``optimizer``, ``clip_grad``, ``accumulative_counts``).
    """

    def __init__(self,
                 loss_scale: Union[str, float, dict] = 'dynamic',
                 dtype: Optional[Union[str, torch.dtype]] = None,
                 **kwargs) -> None:
        OptimWrapper.__init__(self, **kwargs)
        device = get_device()
        auto = dtype == AUTO_DTYPE
        dtype = resolve_amp_dtype(dtype, device)
        if device == 'cpu' and dtype not in (torch.bfloat16, None):
            raise ValueError(f'CPU autocast supports bfloat16 only, got {dtype}: set optim_wrapper.dtype='
                             "'bfloat16' or 'auto' (or train on a GPU for float16).")
        if auto:
            print_log(f"beit_mm.AmpOptimWrapper: dtype='auto' on {device}: "
                      + (f'{str(dtype).replace("torch.", "")} autocast' if dtype is not None else
                         f'fp32, no autocast ({describe_cpu()}: bf16 would be emulated)')
                      + (', dynamic loss scaling' if dtype == torch.float16 and loss_scale == 'dynamic' else ''),
                      logger='current')
        elif device == 'cpu' and not cpu_has_native_bf16():
            print_log(f'beit_mm.AmpOptimWrapper: bf16 autocast on {describe_cpu()}: bf16 is emulated here, about 70x '
                      'slower than fp32 for matmuls; for speed use a GPU, a CPU with AVX512-BF16/AMX, or fp32 '
                      "(optim_wrapper type='OptimWrapper' without dtype, or dtype='auto'; tools/train.py --amp keeps "
                      'fp32 on such a CPU)', logger='current', level=logging.WARNING)
        self.cast_dtype = dtype
        self._scale_update_param = None
        use_scaler = dtype == torch.float16
        if loss_scale == 'dynamic':
            self.loss_scaler = torch.amp.GradScaler(device, enabled=use_scaler)
        elif isinstance(loss_scale, float):
            self._scale_update_param = loss_scale
            self.loss_scaler = torch.amp.GradScaler(device, init_scale=loss_scale, enabled=use_scaler)
        elif isinstance(loss_scale, dict):
            self.loss_scaler = torch.amp.GradScaler(device, **{'enabled': use_scaler, **loss_scale})
        else:
            raise TypeError(f"loss_scale must be 'dynamic', a float or a dict of GradScaler kwargs, got {loss_scale!r}")

    @contextmanager
    def optim_context(self, model: torch.nn.Module):
        """MMEngine's context (autocast to ``cast_dtype``); without autocast where ``dtype='auto'`` resolved to fp32."""
        if self.cast_dtype is None:
            with OptimWrapper.optim_context(self, model):
                yield
        else:
            with super().optim_context(model):
                yield
