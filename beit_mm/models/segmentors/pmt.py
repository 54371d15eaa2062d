"""PMT, the plain mask transformer: a frozen DINOv3 read by a small plain mask decoder (tue-mps/pmt, arXiv 2603.25398).

The frozen encoder's blocks ``feature_indices`` are each read through its final norm, giving ``L`` token sequences
``(B, P + h*w, C)``. Per level a BatchNorm over the channels, ``f + mlp(f)`` (``C -> C/2 -> C``) and a per-channel
scaler; the levels are summed. ``K`` learned queries join the sum, and six DINOv3 blocks (no key bias, layer scale 1,
MLP ratio 1, the encoder's RoPE on the patches) with their own final norm decode them with EoMT's heads and annealed
masked attention: a prediction before each block and after the last. Source:
github.com/tue-mps/pmt@54d73c9 (``image/models/pmt.py``, ``image/models/pmd.py``, ``image/models/layers.py``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmcv.cnn import build_norm_layer
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ..backbones.dinov3 import DINOv3
from ..layers.dinov3_block import DINOv3Block
from .eomt import EoMT


class LevelSum(nn.Module):
    """Sum of ``L`` normed, projected, scaled token sequences (B, T, C) -> (B, T, C).

    Level ``i``: ``f = bn[i](f)`` over C, ``f = f + lateral_projections[i](f)`` (Linear C -> C/2, GELU, Linear C/2
    -> C), ``f = f * scalers[i]``.

    Args:
        channels: ``C``.
        num_levels: ``L``.
        norm_cfg: the per-level norm over channels, given (B, C, T) (``SyncBN``; ``BN1d`` off a process group).
    """

    def __init__(self, channels: int, num_levels: int, norm_cfg: dict) -> None:
        super().__init__()
        self.bn = nn.ModuleList([build_norm_layer(norm_cfg, channels)[1] for _ in range(num_levels)])
        self.lateral_projections = nn.ModuleList([
            nn.Sequential(nn.Linear(channels, channels // 2), nn.GELU(), nn.Linear(channels // 2, channels))
            for _ in range(num_levels)
        ])
        self.scalers = nn.ParameterList([nn.Parameter(torch.ones(channels)) for _ in range(num_levels)])

    def forward(self, levels: Sequence[Tensor]) -> Tensor:
        out = 0
        for f, bn, proj, scale in zip(levels, self.bn, self.lateral_projections, self.scalers):
            f = bn(f.transpose(1, 2)).transpose(1, 2)
            out = out + (f + proj(f)) * scale
        return out


@MODELS.register_module()
class PMT(EoMT):
    """PMT segmentor with EoMT's interface (tasks, loss, post-processing, mask annealing).

    Args:
        backbone: a ``beit_mm.DINOv3`` config with ``final_norm=True``; frozen: no gradients, always in eval mode
            (its RoPE unaugmented), run under ``no_grad``.
        num_classes: semantic classes ``C``; the class head has ``C + 1`` outputs, the last "no object".
        feature_indices: the encoder blocks read (0-based; PMT-L 5, 11, 17, 23; S/B 2, 5, 8, 11).
        num_queries, num_blocks: ``K`` and the decoder blocks.
        mlp_ratio, layer_scale_init_value: the decoder blocks' (1.0 and 1.0).
        norm_cfg: the per-level norm of :class:`LevelSum`.
        attn_impl: the decoder blocks' attention path (``'auto'``, ``'sdpa'``, ``'eager'``).
        masked_attn, mask_annealing, loss, ignore_index, task, num_things_classes, mask_thresh, overlap_thresh,
            top_k_instances, data_preprocessor, train_cfg, test_cfg, init_cfg: as :class:`EoMT`'s.

    Raises:
        ValueError: the backbone is not a DINOv3, a feature index is outside it, or :class:`EoMT`'s errors.

    An encoder read from a file (``backbone.init_cfg`` ``Pretrained``) is not the model's to save: ``state_dict``
    leaves it out, and loading a state dict without it reads it from that file again. A randomly initialized encoder
    is saved with the decoder.
    """

    #: Name prefixes of the weights inference reads from a checkpoint: the decoder; the encoder is its own file.
    inference_weights = ('neck.', 'q.', 'decoder_blocks.', 'decoder_norm.', 'class_head.', 'mask_head.', 'upscale.',
                         'attn_mask_probs')
    queries_join_backbone = False

    def __init__(self,
                 backbone: dict,
                 num_classes: int,
                 feature_indices: Sequence[int] = (5, 11, 17, 23),
                 num_queries: int = 100,
                 num_blocks: int = 6,
                 mlp_ratio: float = 1.0,
                 layer_scale_init_value: float = 1.0,
                 norm_cfg: dict | None = None,
                 attn_impl: str = 'auto',
                 **kwargs) -> None:
        super().__init__(backbone, num_classes, num_queries=num_queries, num_blocks=num_blocks, **kwargs)
        if not isinstance(self.backbone, DINOv3):
            raise ValueError(f'PMT reads a beit_mm.DINOv3 encoder (its RoPE feeds the decoder), got '
                             f'{type(self.backbone).__name__}; set backbone.type=\'beit_mm.DINOv3\'')
        depth = self.backbone.num_layers
        if not feature_indices or any(not 0 <= i < depth for i in feature_indices):
            raise ValueError(f'feature_indices={tuple(feature_indices)} must name blocks of the {depth}-block encoder '
                             '(0-based; PMT-L reads 5, 11, 17, 23, PMT-S/B 2, 5, 8, 11)')
        self.feature_indices = tuple(feature_indices)
        init = self.backbone.init_cfg
        self.encoder_file = init['checkpoint'] if isinstance(init, dict) and init.get('type') == 'Pretrained' else None
        self.backbone.requires_grad_(False)
        self.backbone.eval()
        dims, heads = self.backbone.embed_dims, self.backbone.num_heads
        self.neck = LevelSum(dims, len(self.feature_indices), norm_cfg or dict(type='SyncBN'))
        self.decoder_blocks = nn.ModuleList([
            DINOv3Block(dims, heads, mlp_ratio=mlp_ratio, layer_scale_init_value=layer_scale_init_value,
                        attn_impl=attn_impl) for _ in range(num_blocks)
        ])
        self.decoder_norm = nn.LayerNorm(dims)
        self.register_state_dict_post_hook(_drop_encoder_read_from_file)
        self.register_load_state_dict_post_hook(_encoder_from_its_file)

    def train(self, mode: bool = True) -> PMT:
        """Set the decoder's mode; the frozen encoder stays in eval mode."""
        super().train(mode)
        self.backbone.eval()
        return self

    def encoder_features(self, inputs: Tensor) -> tuple[list[Tensor], tuple[int, int], tuple[Tensor, Tensor]]:
        """(B, 3, H, W) -> the ``feature_indices`` blocks' final-normed tokens (B, P + h*w, C), the grid (h, w) and
        the encoder's RoPE (sin, cos), computed without gradients."""
        backbone = self.backbone
        with torch.no_grad():
            x, grid = backbone.embed(inputs)
            rope = backbone.position_encoding(grid)
            features = []
            for i, blk in enumerate(backbone.blocks[:max(self.feature_indices) + 1]):
                x = blk(x, grid, rope)
                if i in self.feature_indices:
                    features.append(backbone.norm(x))
        return features, grid, rope

    def predictions(self, inputs: Tensor, phases: tuple[str, ...]) -> tuple[list[Tensor], list[Tensor]]:
        """(B, 3, H, W) -> per prediction, mask logits (B, K, H/4, W/4) and class logits (B, K, C + 1), the masked
        blocks' first; ``phases`` as :meth:`EoMT.mask_phases`, one per decoder block."""
        features, grid, rope = self.encoder_features(inputs)
        x = self.neck(features)
        x = torch.cat([self.q.weight[None].expand(x.shape[0], -1, -1), x], dim=1)
        masks, classes = [], []
        for j, blk in enumerate(self.decoder_blocks):
            attn_mask = None
            if phases[j] != 'off':
                mask_logits, class_logits = self._predict(self.decoder_norm(x), grid)
                masks.append(mask_logits)
                classes.append(class_logits)
                prob = self.attn_mask_probs[j] if phases[j] == 'draw' else None
                attn_mask = self._attn_mask(mask_logits, grid, x.shape[1], prob)
            x = blk(x, grid, rope, num_queries=self.num_queries, attn_mask=attn_mask)
        mask_logits, class_logits = self._predict(self.decoder_norm(x), grid)
        return masks + [mask_logits], classes + [class_logits]


def _is_encoder(key: str, prefix: str = '') -> bool:
    return key.startswith(prefix + 'backbone.') or (not prefix and '.backbone.' in key)


def _drop_encoder_read_from_file(module: PMT, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    """State-dict hook: an encoder read from its own file is left out."""
    if module.encoder_file is not None:
        for key in [k for k in state_dict if _is_encoder(k, prefix)]:
            del state_dict[key]


def _encoder_from_its_file(module: PMT, incompatible_keys) -> None:
    """Load post-hook: a state dict without any encoder weight, for a model whose encoder is read from a file, loads
    strictly and the encoder is read from that file."""
    missing = incompatible_keys.missing_keys
    lacking = [k for k in missing if _is_encoder(k)]
    if module.encoder_file is None or len(lacking) != len(module.backbone.state_dict()):
        return
    module.backbone.init_weights()
    missing[:] = [k for k in missing if not _is_encoder(k)]
