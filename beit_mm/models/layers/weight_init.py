"""unilm BEiT's truncated-normal initializations: cut at one std in pretraining, at +-2 in fine-tuning."""
from __future__ import annotations

import math

import torch
from torch import Tensor

# unilm's std of every truncated-normal init of BEiT
BEIT_INIT_STD = 0.02
# timm `trunc_normal_` default bounds (absolute values), used by unilm `modeling_finetune.py`.
TIMM_TRUNC_BOUND = 2.0


def trunc_normal_within_std_(tensor: Tensor, std: float = BEIT_INIT_STD) -> Tensor:
    """unilm ``modeling_pretrain.trunc_normal_``: N(0, std^2) truncated to [-std, std], in place."""
    return torch.nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-std, b=std)


def trunc_normal_timm_(tensor: Tensor, std: float = BEIT_INIT_STD) -> Tensor:
    """timm ``trunc_normal_(tensor, std=std)`` (unilm ``modeling_finetune.py``): bounds -2 and 2, in place."""
    return torch.nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-TIMM_TRUNC_BOUND, b=TIMM_TRUNC_BOUND)


def truncated_std(std: float, bound: float) -> float:
    """Standard deviation of N(0, std^2) truncated to [-bound, bound] (to check initializations statistically)."""
    z = bound / std
    phi = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(z / math.sqrt(2))  # Phi(z) - Phi(-z)
    return std * math.sqrt(1 - 2 * z * phi / mass)
