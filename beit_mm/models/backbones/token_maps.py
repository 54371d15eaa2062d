"""The patch-token outputs plain ViT backbones (BEiT, DINOv3) share: maps, probe features, layer ids."""
from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


class TokenMapsMixin:
    """Outputs of a backbone whose ``forward_tokens(x, mask, out_indices)`` gives token sequences
    (B, ``num_prefix_tokens`` + h*w, C) and the grid (h, w)."""

    EMBEDDING_PARAMS: tuple[str, ...] = ('cls_token', 'reg_token', 'mask_token')

    def _maps(self, outs: Sequence[Tensor], grid: tuple[int, int]) -> list[Tensor]:
        h, w = grid
        return [t[:, self.num_prefix_tokens:].transpose(1, 2).reshape(t.shape[0], -1, h, w) for t in outs]

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, ...]:
        """(B, 3, H, W) -> one (B, C, H/p, W/p) map per ``out_indices`` entry (prefix tokens dropped)."""
        return tuple(self._maps(*self.forward_tokens(x, mask)))

    def segmentation_layers(self) -> tuple[int, ...]:
        """The blocks at 1/3, 1/2, 2/3 and all of the depth: mmseg/unilm UPerNet's (3, 5, 7, 11) for 12 blocks."""
        return tuple(sorted({max(0, round(self.num_layers * f) - 1) for f in (1 / 3, 1 / 2, 2 / 3, 1)}))

    def dense_features(self, x: Tensor, layers: Sequence[int] | None = None) -> list[Tensor]:
        """Patch-token maps (B, C, H/p, W/p) of the blocks ``layers`` (None:
        :meth:`segmentation_layers`), in order, the last final-normed.

        Raises:
            ValueError: ``layers`` empty or naming a block the backbone does not have.
        """
        layers = self.segmentation_layers() if layers is None else layers
        if not layers or any(not -self.num_layers <= i < self.num_layers for i in layers):
            raise ValueError(f'layers {tuple(layers)} must be block indices in [-{self.num_layers}, '
                             f'{self.num_layers - 1}] (this {type(self).__name__} has {self.num_layers} blocks)')
        return self._maps(*self.forward_tokens(x, out_indices=sorted({i % self.num_layers for i in layers})))

    def get_layer_depth(self, param_name: str, prefix: str = '') -> tuple[int, int]:
        """Layer id for layer-wise lr decay and the id count ``num_layers + 2``:
        embeddings 0, block i -> i + 1, the rest -> num_layers + 1."""
        num_ids = self.num_layers + 2
        if not param_name.startswith(prefix):
            return num_ids - 1, num_ids
        name = param_name[len(prefix):]
        if name in self.EMBEDDING_PARAMS or name.startswith('patch_embed.'):
            return 0, num_ids
        if name.startswith('blocks.'):
            return int(name.split('.')[1]) + 1, num_ids
        return num_ids - 1, num_ids
