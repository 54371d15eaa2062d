"""ViT-Adapter on BEiT (Chen et al. ICLR 2023; czczup/ViT-Adapter ``beit_adapter.py``), official names."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from torch import Tensor, nn

from ...registry import MODELS
from ..layers.vit_adapter import InteractionBlock, SpatialPriorModule, deform_inputs, init_adapter_weights
from .beit import BEiT, checkpoint_filter_fn
from .pretrained import load_pretrained_backbone

#: The adapter's own weights, which keep their init when a plain BEiT checkpoint is loaded (``keep_init``).
ADAPTER_WEIGHTS = (r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)', )

#: ViT-Adapter's stride: the prior's levels are 2x, 1x and 0.5x the ViT grid, so the ViT must be at stride 16.
PATCH_SIZE = 16


@MODELS.register_module()
class BEiTAdapter(BEiT):
    """BEiT with ViT-Adapter: (B, 3, H, W), H, W multiples of 32 -> 4 maps (B, C, H/s, W/s), s = 4, 8, 16, 32.

    Args:
        interaction_indexes: block groups ``[[first, last], ...]`` covering the blocks in order, one interaction each.
        conv_inplane: width of the spatial prior module's first stage.
        n_points: sampling points per head and level of the deformable attention.
        deform_num_heads: heads of the deformable attention.
        cffn_ratio: the extractor's CFFN width / ``embed_dims``.
        deform_ratio: the deformable attention's value width / ``embed_dims``.
        with_cffn: the extractor's CFFN.
        add_vit_feature: add the 4 groups' ViT maps to the prior's levels.
        norm_cfg: the norm of the spatial prior and of the outputs.
        layer_scale_init_value: the blocks' and the injectors' initial gamma.
        drop_path_rate: the blocks' stochastic depth and the extractors' CFFN drop path.
        **kwargs: other :class:`BEiT` arguments.
    """

    def __init__(self,
                 interaction_indexes: Sequence[Sequence[int]],
                 conv_inplane: int = 64,
                 n_points: int = 4,
                 deform_num_heads: int = 6,
                 cffn_ratio: float = 0.25,
                 deform_ratio: float = 1.0,
                 with_cffn: bool = True,
                 add_vit_feature: bool = True,
                 norm_cfg: dict | None = None,
                 layer_scale_init_value: float = 1e-6,
                 drop_path_rate: float = 0.3,
                 patch_size: int = PATCH_SIZE,
                 with_cp: bool = False,
                 **kwargs) -> None:
        unsupported = [k for k in ('use_abs_pos_emb', 'use_shared_rel_pos_bias', 'num_register_tokens',
                                   'with_mask_token', 'cls_pretrain', 'final_norm', 'no_embed_class') if kwargs.get(k)]
        if unsupported:
            raise ValueError(f'BEiTAdapter does not support {unsupported} (the official ViT-Adapter BEiT has per-block '
                             'relative position bias only); drop these arguments from the backbone config')
        if patch_size != PATCH_SIZE:
            raise ValueError(f'BEiTAdapter needs patch_size={PATCH_SIZE} (its prior levels are strides 8/16/32 around '
                             f'the ViT at stride 16), got {patch_size}')
        if layer_scale_init_value <= 0:
            raise ValueError('BEiTAdapter needs layer_scale_init_value > 0 (official init_values, 1e-6 in the BEiT '
                             'recipes): it also initializes the injectors\' gamma')
        super().__init__(patch_size=patch_size, layer_scale_init_value=layer_scale_init_value,
                         drop_path_rate=drop_path_rate, with_cp=with_cp, **kwargs)
        groups = [tuple(int(i) for i in g) for g in interaction_indexes]
        flat = [i for first, last in groups for i in range(first, last + 1)]
        if any(len(g) != 2 for g in groups) or flat != list(range(self.num_layers)):
            raise ValueError(f'interaction_indexes={interaction_indexes} must be [first, last] pairs covering blocks '
                             f'0..{self.num_layers - 1} in order, e.g. [[0, 5], [6, 11], [12, 17], [18, 23]] for 24')
        if add_vit_feature and len(groups) != 4:
            raise ValueError(f'add_vit_feature needs 4 interaction groups (one ViT map per output level), got '
                             f'{len(groups)}')
        self.interaction_indexes = groups
        self.add_vit_feature = add_vit_feature
        norm_cfg = dict(type='SyncBN', requires_grad=True) if norm_cfg is None else norm_cfg
        dims = self.embed_dims
        self.level_embed = nn.Parameter(torch.zeros(3, dims))
        self.spm = SpatialPriorModule(conv_inplane, dims, norm_cfg)
        self.interactions = nn.Sequential(*[
            InteractionBlock(dims, deform_num_heads, n_points, init_values=layer_scale_init_value,
                             drop_path=drop_path_rate, with_cffn=with_cffn, cffn_ratio=cffn_ratio,
                             deform_ratio=deform_ratio, extra_extractor=i == len(groups) - 1, with_cp=with_cp)
            for i in range(len(groups))
        ])
        self.up = nn.ConvTranspose2d(dims, dims, 2, 2)
        for i in range(1, 5):
            self.add_module(f'norm{i}', build_norm_layer(norm_cfg, dims)[1])

    def init_weights(self) -> None:
        """BEiT's init plus the official adapter init, or a checkpoint."""
        self._init_random()
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            load_pretrained_backbone(
                self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'), adapt=checkpoint_filter_fn,
                convert_hint='A plain BEiT file needs init_cfg.keep_init=beit_mm.models.backbones.beit_adapter.'
                'ADAPTER_WEIGHTS; an official ViT-Adapter file: python tools/convert_checkpoint.py --model '
                'vit_adapter SRC DST.', keep_init=self.init_cfg.get('keep_init', ()))
        self._is_init = True

    def _init_random(self) -> None:
        super()._init_random()
        with torch.no_grad():
            for m in (self.spm, self.interactions, self.up, self.norm1, self.norm2, self.norm3, self.norm4):
                init_adapter_weights(m)
            nn.init.normal_(self.level_embed)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(B, 3, H, W) -> (f1, f2, f3, f4) at strides 4, 8, 16, 32 (official ``BEiTAdapter.forward``)."""
        if mask is not None:
            raise ValueError('BEiTAdapter is a dense-prediction backbone; it takes no MIM mask')
        b, _, height, width = x.shape
        if height % 32 or width % 32:
            raise ValueError(f'BEiTAdapter needs an input size divisible by 32 (its coarsest level is stride 32), got '
                             f'{height}x{width}; set the data preprocessor\'s size_divisor=32 or pad the crop')
        h, w = grid = (height // PATCH_SIZE, width // PATCH_SIZE)
        inputs = deform_inputs(grid, x.device)

        c1, c2, c3, c4 = self.spm(x)
        c = torch.cat([c2 + self.level_embed[0], c3 + self.level_embed[1], c4 + self.level_embed[2]], dim=1)

        tokens, _ = self.embed(x)  # [cls, patches]; no position embedding (relative bias only)
        cls, x = tokens[:, :1], tokens[:, 1:]

        def run_blocks(first: int, last: int) -> Callable[[Tensor], Tensor]:
            def run(t: Tensor) -> Tensor:
                for blk in self.blocks[first:last + 1]:
                    t = self._run_block(blk, t, grid, None)
                return t
            return run

        vit_maps = []
        for (first, last), layer in zip(self.interaction_indexes, self.interactions):
            x, c, cls = layer(x, c, cls, run_blocks(first, last), inputs, grid)
            vit_maps.append(x.transpose(1, 2).reshape(b, -1, h, w))

        n2, n3 = 4 * h * w, h * w
        c2 = c[:, :n2].transpose(1, 2).reshape(b, -1, 2 * h, 2 * w)
        c3 = c[:, n2:n2 + n3].transpose(1, 2).reshape(b, -1, h, w)
        c4 = c[:, n2 + n3:].transpose(1, 2).reshape(b, -1, h // 2, w // 2)
        c1 = self.up(c2) + c1
        if self.add_vit_feature:
            x1, x2, x3, x4 = vit_maps
            c1 = c1 + F.interpolate(x1, scale_factor=4, mode='bilinear', align_corners=False)
            c2 = c2 + F.interpolate(x2, scale_factor=2, mode='bilinear', align_corners=False)
            c3 = c3 + x3
            c4 = c4 + F.interpolate(x4, scale_factor=0.5, mode='bilinear', align_corners=False)
        return self.norm1(c1), self.norm2(c2), self.norm3(c3), self.norm4(c4)
