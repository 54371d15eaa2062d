"""Mean-pooled patch tokens + ``fc_norm``: BEiT's fine-tuning representation, named as in unilm/timm."""
from __future__ import annotations

from mmengine.model import BaseModule
from torch import Tensor, nn

from beit_mm.registry import MODELS

# unilm `modeling_finetune.py`: norm_layer = partial(nn.LayerNorm, eps=1e-6)
FC_NORM_EPS = 1e-6


@MODELS.register_module()
class MeanPoolNeck(BaseModule):
    """(B, C, h, w) maps -> LayerNorm(mean over h, w) (B, C), per input level; ``in_channels`` C."""

    def __init__(self, in_channels: int, init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.fc_norm = nn.LayerNorm(in_channels, eps=FC_NORM_EPS)

    def forward(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Tuple of (B, C, h, w) maps -> tuple of (B, C)."""
        if not isinstance(inputs, (tuple, list)) or any(x.dim() != 4 for x in inputs):
            raise ValueError('MeanPoolNeck expects a tuple of (B, C, h, w) maps, as beit_mm.BEiT returns')
        return tuple(self.fc_norm(x.mean(dim=(2, 3))) for x in inputs)
