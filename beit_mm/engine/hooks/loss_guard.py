"""Stop training at the first NaN/inf loss, with the iteration, the loss terms and what to try."""
from __future__ import annotations

import logging
import math

from mmengine.hooks import Hook
from mmengine.optim import OptimWrapperDict

from beit_mm.registry import HOOKS


class NonFiniteLossError(FloatingPointError):
    """The loss of a training iteration is NaN or infinite."""


def _as_float(value) -> float:
    return float(value.detach().float().mean()) if hasattr(value, 'detach') else float(value)


def _loss_scalers(optim_wrapper) -> list:
    """The enabled dynamic loss scalers (fp16 AMP) of the run's optimizer wrapper(s)."""
    wrappers = optim_wrapper.values() if isinstance(optim_wrapper, OptimWrapperDict) else [optim_wrapper]
    scalers = [getattr(w, 'loss_scaler', None) for w in wrappers]
    return [s for s in scalers if s is not None and (not hasattr(s, 'is_enabled') or s.is_enabled())]


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Raise :class:`NonFiniteLossError` when a training iteration's loss (or any ``loss*`` term) is NaN or inf, before
    a checkpoint is written; under a dynamic fp16 loss scaler only after ``max_skipped`` consecutive skipped steps.

    Args:
        max_skipped: consecutive non-finite iterations tolerated under a dynamic loss scaler.
    """

    priority = 'ABOVE_NORMAL'  # before CheckpointHook (VERY_LOW) and LoggerHook (BELOW_NORMAL)

    def __init__(self, max_skipped: int = 50) -> None:
        self.max_skipped = max_skipped
        self._skipped = 0

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not isinstance(outputs, dict):
            return
        terms = {k: _as_float(v) for k, v in outputs.items() if 'loss' in k}
        bad = [k for k, v in terms.items() if not math.isfinite(v)]
        if not bad:
            self._skipped = 0
            return
        iteration = runner.iter + 1
        listed = ', '.join(f'{k}={v:.4g}' for k, v in terms.items())
        scalers = _loss_scalers(runner.optim_wrapper)
        if scalers:
            self._skipped += 1
            runner.logger.log(logging.WARNING, f'iteration {iteration}: non-finite loss ({listed}); the fp16 loss '
                              f'scaler skips this step (scale now {scalers[0].get_scale():.4g}, {self._skipped} '
                              'consecutive)')
            if self._skipped < self.max_skipped:
                return
        lrs = {k: v[0] for k, v in runner.optim_wrapper.get_lr().items()} if hasattr(
            runner.optim_wrapper, 'get_lr') else {}
        clip = runner.cfg.get('optim_wrapper', {}).get('clip_grad')
        dtype = getattr(runner.optim_wrapper, 'cast_dtype', None)
        amp_hint = (f'AMP runs in {dtype}: try bfloat16 (fp32\'s range) or fp32 (without --amp)' if dtype is not None
                    else 'the run is fp32 (no AMP), so this is no fp16 overflow')
        clip_hint = ('enable gradient clipping (optim_wrapper.clip_grad=dict(max_norm=3.0))' if not clip else
                     f'gradient clipping is on ({dict(clip)}): try a smaller max_norm')
        raise NonFiniteLossError(
            f'non-finite loss at iteration {iteration}: {listed} (non-finite: {", ".join(bad)}). '
            f'Hints: lower the learning rate (now {", ".join(f"{k} {v:.3g}" for k, v in lrs.items()) or "?"}; '
            f'optim_wrapper.optimizer.lr, warmup in param_scheduler); '
            f'{clip_hint}; '
            f'{amp_hint}; '
            'check the data (python tools/analysis/check_dataset.py CONFIG). The weights after this step are not '
            'saved; resume from the last checkpoint with --resume after changing the config.')
