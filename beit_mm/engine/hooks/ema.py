"""``--ema``: an exponential moving average of the weights with MMEngine's ``EMAHook``; checkpoints hold the EMA
weights in ``state_dict`` and the raw ones in ``ema_state_dict``."""
import logging

from mmengine.config import Config
from mmengine.logging import print_log

# unilm's --model_ema_decay 0.9999 at mmpretrain's priority (before validation and checkpoints)
EMA_DEFAULTS = dict(type='EMAHook', ema_type='ExponentialMovingAverage', momentum=1e-4, update_buffers=False,
                    priority='ABOVE_NORMAL')


def _is_ema_hook(hook: dict) -> bool:
    return str(hook.get('type', '')).split('.')[-1] == 'EMAHook'


def has_ema_hook(cfg: Config) -> bool:
    """Whether ``cfg.custom_hooks`` holds an ``EMAHook`` (``--ema`` or the config's own)."""
    return any(_is_ema_hook(h) for h in cfg.get('custom_hooks') or [])


def enable_ema(cfg: Config) -> None:
    """Append MMEngine's ``EMAHook`` (``cfg.ema_cfg`` or :data:`EMA_DEFAULTS`) to ``cfg.custom_hooks`` unless there.

    Raises:
        ValueError: ``cfg.ema_cfg`` is not an ``EMAHook`` config.
    """
    if has_ema_hook(cfg):
        print_log('--ema: the config already has an EMAHook in custom_hooks', logger='current', level=logging.WARNING)
        return
    ema = dict(cfg.get('ema_cfg') or EMA_DEFAULTS)
    if not _is_ema_hook(ema):
        raise ValueError(f"ema_cfg must be an EMAHook config (type='EMAHook', momentum=...), got {ema}")
    cfg.custom_hooks = [*(cfg.get('custom_hooks') or []), ema]
    print_log(f'--ema: custom_hooks += {ema}', logger='current')
