"""The transformer feed-forward network with checkpoint-native names ``fc1``/``fc2``."""
from __future__ import annotations

from torch import Tensor, nn


class Mlp(nn.Module):
    """fc1 -> activation -> dropout -> fc2 -> dropout. x: (..., C) -> (..., out_features or C)."""

    def __init__(self,
                 in_features: int,
                 hidden_features: int,
                 out_features: int | None = None,
                 act_layer: type[nn.Module] = nn.GELU,
                 drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features or in_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))
