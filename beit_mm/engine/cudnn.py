"""``env_cfg.cudnn_deterministic=True`` (the BEiT ADE20K configs): deterministic cuDNN kernels without
``torch.use_deterministic_algorithms``."""
import torch
from mmengine.config import Config


def use_cudnn_deterministic(cfg: Config) -> None:
    """``env_cfg.cudnn_deterministic=True``: ``torch.backends.cudnn.deterministic = True``, what unilm's
    ``--deterministic`` sets (mmseg 0.x ``set_random_seed``), without MMEngine's ``randomness.deterministic``, which
    also calls ``torch.use_deterministic_algorithms(True)``: that raises on CUDA in the backward of
    ``AdaptiveAvgPool2d`` and of bilinear ``interpolate`` (torch 2.13's list), both in UPerNet. The key is consumed
    here: FlexibleRunner's strategies refuse unknown ``env_cfg`` keys."""
    env_cfg = cfg.get('env_cfg') or {}
    if env_cfg.pop('cudnn_deterministic', False):
        torch.backends.cudnn.deterministic = True
