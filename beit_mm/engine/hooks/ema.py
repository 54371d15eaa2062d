"""``--ema``: an exponential moving average of the weights with MMEngine's ``EMAHook`` (unilm's ``--model_ema``,
mmpretrain's ``EMAHook``). Validation and the saved checkpoints' ``state_dict`` are the EMA weights; the raw weights
go to ``ema_state_dict`` (MMEngine swaps them), and resuming restores both."""
import logging

from mmengine.config import Config
from mmengine.logging import print_log

# --ema without an ``ema_cfg`` in the config. unilm beit/run_class_finetuning.py: ``--model_ema_decay`` default 0.9999,
# ``ModelEma.update(model)`` after every optimizer step (timm ModelEma: ema = decay * ema + (1 - decay) * weights);
# MMEngine's ExponentialMovingAverage: ema = (1 - momentum) * ema + momentum * weights, so momentum = 1 - decay.
# mmpretrain 1.2.0 configs/convnext/convnext-base_32xb128_in1k.py line 18: EMAHook momentum=1e-4, priority
# 'ABOVE_NORMAL' (vision_transformer/vit-base-p16_32xb128-mae_in1k.py line 53: 1e-4), so that the EMA weights are
# swapped in before validation and checkpoint hooks run. Buffers (BatchNorm statistics) are copied, not averaged
# (MMEngine's default, update_buffers=False).
EMA_DEFAULTS = dict(type='EMAHook', ema_type='ExponentialMovingAverage', momentum=1e-4, update_buffers=False,
                    priority='ABOVE_NORMAL')


def _is_ema_hook(hook: dict) -> bool:
    return str(hook.get('type', '')).split('.')[-1] == 'EMAHook'


def has_ema_hook(cfg: Config) -> bool:
    """Whether ``cfg.custom_hooks`` holds an ``EMAHook`` (``--ema`` or the config's own)."""
    return any(_is_ema_hook(h) for h in cfg.get('custom_hooks') or [])


def enable_ema(cfg: Config) -> None:
    """Append MMEngine's ``EMAHook`` (``cfg.ema_cfg`` or :data:`EMA_DEFAULTS`) to ``cfg.custom_hooks``, unless the
    config already has one.

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
