"""BEiT backbone (Bao et al. 2021; unilm ``beit/modeling_finetune.py``), with official parameter names.

BEiT v2's cls-token pretraining (unilm ``beit2/modeling_pretrain.py``) is the ``cls_pretrain`` switch; its blocks live
here because they share the backbone's relative position bias and final norm.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import torch
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch import Tensor, nn

from ...registry import MODELS
from ..layers import BEiTBlock, RelativePositionBias, resize_pos_embed, resize_rel_pos_bias_table
from ..layers.rel_pos_bias import NUM_CLS_ROWS
from ..layers.weight_init import trunc_normal_timm_, trunc_normal_within_std_
from .pretrained import load_pretrained_backbone
from .token_maps import TokenMapsMixin

ARCHS: dict[str, dict] = {
    'tiny': dict(embed_dims=192, num_layers=12, num_heads=3, mlp_ratio=4.0),
    'small': dict(embed_dims=384, num_layers=12, num_heads=6, mlp_ratio=4.0),
    'base': dict(embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4.0),
    'large': dict(embed_dims=1024, num_layers=24, num_heads=16, mlp_ratio=4.0),
}


INIT_MODES = ('finetune', 'pretrain')


class PatchEmbed(nn.Module):
    """Non-overlapping patches by a strided conv: (B, 3, H, W) -> (B, C, H/p, W/p). Parameter ``proj``."""

    def __init__(self, in_channels: int, embed_dims: int, patch_size: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dims, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: Tensor) -> Tensor:
        h, w = x.shape[-2:]
        if h % self.patch_size or w % self.patch_size:
            raise ValueError(f'input size {h}x{w} is not divisible by the patch size {self.patch_size}; resize or pad '
                             f'the input (mmseg: data_preprocessor size_divisor={self.patch_size})')
        return self.proj(x)


def _check_cls_pretrain(cfg: dict, num_layers: int, with_mask_token: bool, final_norm: bool) -> tuple[int, int]:
    """(early_layers, head_layers) of a ``cls_pretrain`` dict, or a ValueError naming the fix."""
    if set(cfg) != {'early_layers', 'head_layers'}:
        raise ValueError(f'cls_pretrain={cfg} needs exactly the keys early_layers and head_layers, e.g. '
                         'dict(early_layers=9, head_layers=2) for BEiT-B (unilm beit2 PRETRAINING.md)')
    early, head_layers = int(cfg['early_layers']), int(cfg['head_layers'])
    if not 1 <= early <= num_layers or head_layers < 1:
        raise ValueError(f'cls_pretrain={cfg}: early_layers must be in [1, {num_layers}] and head_layers >= 1')
    if not (with_mask_token and final_norm):
        raise ValueError('cls_pretrain is BEiT v2 masked image modeling: build the BEiT with with_mask_token=True '
                         'and final_norm=True')
    return early, head_layers


@MODELS.register_module()
class BEiT(TokenMapsMixin, BaseModule):
    """BEiT vision transformer returning multi-level feature maps.

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' or a dict of ``embed_dims``, ``num_layers``, ``num_heads``,
            ``mlp_ratio``.
        img_size: training size; the grid of the position tables (other sizes resample them on the fly).
        patch_size, in_channels: patch side in pixels, input channels.
        use_abs_pos_emb: learn ``pos_embed`` (1, 1 + N, C); ``no_embed_class``: (1, N, C), patches only.
        num_register_tokens: ``R`` tokens ``reg_token`` (1, R, C) after the cls token, without a position.
        use_rel_pos_bias: a relative position bias table per block.
        use_shared_rel_pos_bias: one table ``rel_pos_bias`` for all blocks (BEiT pretraining).
        layer_scale_init_value: initial gamma; 0 disables layer scale.
        drop_rate, attn_drop_rate: dropout after the embeddings and projections / on the attention.
        drop_path_rate: stochastic depth of the last block, linear from 0.
        out_indices: blocks whose outputs ``forward`` returns (negative counts from the end).
        final_norm: the final LayerNorm ``norm`` on the last block's output.
        with_mask_token: learn ``mask_token`` for masked image modeling.
        with_cp: activation checkpointing of every block.
        cls_pretrain: ``dict(early_layers, head_layers)`` for BEiT v2's cls-token pretraining, or None.
        attn_impl: ``'auto'``, ``'sdpa'``, ``'eager'``, ``'flex'`` or ``'cudnn'``; the same function.
        init_mode: ``'finetune'`` or ``'pretrain'``: unilm's random init of that stage.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH, prefix=None, keep_init=[REGEX, ...])``; missing backbone
            weights raise, ``keep_init`` weights keep the random init.
    """

    #: FSDP units, as HF's ``_no_split_modules``.
    fsdp_wrap_units = (BEiTBlock, )
    EMBEDDING_PARAMS = ('cls_token', 'reg_token', 'mask_token', 'pos_embed')  # layer id 0 (TokenMapsMixin)

    def __init__(self,
                 arch: str | dict = 'base',
                 img_size: int | Sequence[int] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 use_abs_pos_emb: bool = False,
                 no_embed_class: bool = False,
                 num_register_tokens: int = 0,
                 use_rel_pos_bias: bool = True,
                 use_shared_rel_pos_bias: bool = False,
                 layer_scale_init_value: float = 0.1,
                 drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1,
                 out_indices: Sequence[int] = (-1, ),
                 final_norm: bool = False,
                 with_mask_token: bool = False,
                 with_cp: bool = False,
                 cls_pretrain: dict | None = None,
                 attn_impl: str = 'auto',
                 init_mode: str = 'finetune',
                 init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if init_mode not in INIT_MODES:
            raise ValueError(f'init_mode={init_mode!r} is not supported; use one of {INIT_MODES} (unilm '
                             'modeling_finetune.py or modeling_pretrain.py)')
        self.init_mode = init_mode
        if isinstance(arch, str):
            if arch not in ARCHS:
                raise ValueError(f'unknown BEiT arch {arch!r}; choose one of {sorted(ARCHS)} or pass a dict')
            arch = ARCHS[arch]
        missing = {'embed_dims', 'num_layers', 'num_heads', 'mlp_ratio'} - set(arch)
        if missing:
            raise ValueError(f'BEiT arch dict lacks {sorted(missing)}')
        self.embed_dims = embed_dims = arch['embed_dims']
        self.num_layers = num_layers = arch['num_layers']
        self.num_heads = arch['num_heads']
        img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.patch_size = patch_size
        self.grid = (img_size[0] // patch_size, img_size[1] // patch_size)
        self.layer_scale_init_value = layer_scale_init_value
        if num_register_tokens < 0:
            raise ValueError(f'num_register_tokens={num_register_tokens} must be >= 0')
        if num_register_tokens and (use_rel_pos_bias or use_shared_rel_pos_bias or cls_pretrain is not None
                                    or (use_abs_pos_emb and not no_embed_class)):
            raise ValueError(f'num_register_tokens={num_register_tokens} needs use_rel_pos_bias=False, '
                             'use_shared_rel_pos_bias=False, no cls_pretrain and, with use_abs_pos_emb, '
                             'no_embed_class=True (a DINOv2-style ViT: registers have no position, and relative '
                             'position tables have rows for one cls token only)')
        self.no_embed_class = no_embed_class
        self.num_prefix_tokens = 1 + num_register_tokens

        self.patch_embed = PatchEmbed(in_channels, embed_dims, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.reg_token = nn.Parameter(torch.zeros(1, num_register_tokens, embed_dims)) if num_register_tokens else None
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dims)) if with_mask_token else None
        num_tokens = (0 if no_embed_class else 1) + self.grid[0] * self.grid[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, embed_dims)) if use_abs_pos_emb else None
        self.pos_drop = nn.Dropout(drop_rate)
        self.rel_pos_bias = RelativePositionBias(self.grid, self.num_heads) if use_shared_rel_pos_bias else None

        dpr = torch.linspace(0, drop_path_rate, num_layers).tolist()
        self.blocks = nn.ModuleList([
            BEiTBlock(embed_dims, self.num_heads, arch['mlp_ratio'],
                      grid=self.grid if use_rel_pos_bias else None,
                      layer_scale_init_value=layer_scale_init_value, drop_path=dpr[i], attn_drop=attn_drop_rate,
                      drop=drop_rate, attn_impl=attn_impl) for i in range(num_layers)
        ])
        if any(not -num_layers <= i < num_layers for i in out_indices):
            raise ValueError(f'out_indices {tuple(out_indices)} out of range for {num_layers} blocks')
        self.out_indices = tuple(i % num_layers for i in out_indices)
        self.final_norm = final_norm
        self.norm = nn.LayerNorm(embed_dims, eps=1e-6) if final_norm else None
        self.with_cp = with_cp
        self.cls_pt_early_layers, self.cls_pt_layers = None, None
        if cls_pretrain is not None:
            early, head_layers = _check_cls_pretrain(cls_pretrain, num_layers, with_mask_token, final_norm)
            # unilm: drop-path rates of a linspace over max(depth, early + head) blocks, taken at early .. early+head-1
            dpr = torch.linspace(0, drop_path_rate, max(num_layers, early + head_layers)).tolist()
            self.cls_pt_early_layers = early
            self.cls_pt_layers = nn.ModuleList([
                BEiTBlock(embed_dims, self.num_heads, arch['mlp_ratio'],
                          grid=self.grid if use_rel_pos_bias else None,
                          layer_scale_init_value=layer_scale_init_value, drop_path=dpr[i], attn_drop=attn_drop_rate,
                          drop=drop_rate, attn_impl=attn_impl) for i in range(early, early + head_layers)
            ])

    def init_weights(self) -> None:
        """unilm's initialization, or the checkpoint of ``init_cfg=dict(type='Pretrained', ...)``."""
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            if self.init_cfg.get('keep_init'):  # the weights not loaded keep unilm's random init
                self._init_random()
            load_pretrained_backbone(
                self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'), adapt=checkpoint_filter_fn,
                convert_hint='Convert official files first: python tools/convert_checkpoint.py --model beit '
                '--source {unilm,timm,hf,mmseg,mmpretrain} SRC DST.', keep_init=self.init_cfg.get('keep_init', ()))
            self._is_init = True
            return
        super().init_weights()
        self._init_random()

    def _init_random(self) -> None:
        """unilm's random initialization (``init_mode``), in place."""
        pretrain = self.init_mode == 'pretrain'
        trunc_normal = trunc_normal_within_std_ if pretrain else trunc_normal_timm_
        # unilm builds cls_pt_layers after its init pass: PyTorch's default Linear init, rescaled below
        cls_pt_modules = set(self.cls_pt_layers.modules()) if self.cls_pt_layers is not None else set()
        with torch.no_grad():
            for p in (self.cls_token, self.mask_token, self.pos_embed):
                if p is not None:
                    trunc_normal(p)
            if self.reg_token is not None:  # timm VisionTransformer.init_weights: normal, std 1e-6
                nn.init.normal_(self.reg_token, std=1e-6)
            for m in self.modules():
                if m in cls_pt_modules:
                    continue
                if isinstance(m, nn.Linear) or (pretrain and isinstance(m, nn.Conv2d)):
                    trunc_normal(m.weight)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
                elif isinstance(m, nn.LayerNorm):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
            for layer_id, blk in enumerate(self.blocks, start=1):  # unilm fix_init_weight
                blk.attn.proj.weight.div_(math.sqrt(2.0 * layer_id))
                blk.mlp.fc2.weight.div_(math.sqrt(2.0 * layer_id))
            if self.cls_pt_layers is not None:  # unilm fix_init_cls_pt_weight: ids continue after early_layers
                for layer_id, blk in enumerate(self.cls_pt_layers, start=self.cls_pt_early_layers + 1):
                    for m in blk.modules():
                        if isinstance(m, nn.Linear):
                            m.reset_parameters()
                    blk.attn.proj.weight.div_(math.sqrt(2.0 * layer_id))
                    blk.mlp.fc2.weight.div_(math.sqrt(2.0 * layer_id))

    def embed(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, tuple[int, int]]:
        """(B, 3, H, W) -> tokens (B, 1 + R + h*w, C) (cls, registers, patches) and the grid (h, w).

        ``mask`` (B, h, w) or (B, h*w) bool, True = masked, swaps patch embeddings for ``mask_token`` before positions.
        """
        x = self.patch_embed(x)
        grid = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        b, n, _ = x.shape
        if mask is not None:
            if self.mask_token is None:
                raise ValueError('a mask was given but this BEiT has no mask token; build it with with_mask_token=True')
            w = mask.reshape(b, n, 1).type_as(x)
            x = x * (1 - w) + self.mask_token.expand(b, n, -1) * w
        if self.pos_embed is not None and self.no_embed_class:
            x = x + resize_pos_embed(self.pos_embed, self.grid, grid, num_extra_tokens=0)
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
        if self.pos_embed is not None and not self.no_embed_class:
            x = x + resize_pos_embed(self.pos_embed, self.grid, grid)
        if self.reg_token is not None:
            x = torch.cat([x[:, :1], self.reg_token.expand(b, -1, -1), x[:, 1:]], dim=1)
        return self.pos_drop(x), grid

    def forward_tokens(self, x: Tensor, mask: Tensor | None = None,
                       out_indices: Sequence[int] | None = None) -> tuple[list[Tensor], tuple[int, int]]:
        """Token sequences (B, 1 + R + h*w, C) of the ``out_indices`` blocks, in order, and the grid (h, w)."""
        out_indices = self.out_indices if out_indices is None else out_indices
        x, grid = self.embed(x, mask)
        shared_table = self.position_encoding(grid)
        outs = []
        for i, blk in enumerate(self.blocks):
            x = self._run_block(blk, x, grid, shared_table)
            if i == self.num_layers - 1 and self.norm is not None:
                x = self.norm(x)
            if i in out_indices:
                outs.append(x)
        return outs, grid

    def position_encoding(self, grid: tuple[int, int]) -> Tensor | None:
        """The shared relative position bias table resampled to the grid (h, w), or None without one."""
        return self.rel_pos_bias(grid) if self.rel_pos_bias is not None else None

    def _run_block(self, blk: BEiTBlock, x: Tensor, grid: tuple[int, int], shared_table: Tensor | None) -> Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(blk, x, grid, shared_table, use_reentrant=False)
        return blk(x, grid, shared_table)

    @property
    def masked_token_dims(self) -> int:
        return self.embed_dims

    def forward_masked(self, x: Tensor, mask: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        """Final-normed patch tokens for masked image modeling.

        Args:
            x: (B, 3, H, W) images.
            mask: (B, H/p, W/p) bool, True = masked.
        Returns:
            (B, H/p * W/p, C), row-major like the mask; with ``cls_pretrain`` also the ``cls_pt_layers`` tokens.
        """
        self.check_forward_masked()
        if self.cls_pt_layers is None:
            return self.forward_tokens(x, mask)[0][-1][:, self.num_prefix_tokens:]
        x, grid = self.embed(x, mask)
        shared_table = self.rel_pos_bias(grid) if self.rel_pos_bias is not None else None
        for i, blk in enumerate(self.blocks):
            x = self._run_block(blk, x, grid, shared_table)
            if i + 1 == self.cls_pt_early_layers:
                early_patches = x[:, 1:]
        x_cls_pt = torch.cat([x[:, :1], early_patches], dim=1)
        for blk in self.cls_pt_layers:
            x_cls_pt = self._run_block(blk, x_cls_pt, grid, shared_table)
        return self.norm(x)[:, 1:], self.norm(x_cls_pt)[:, 1:]

    def check_forward_masked(self) -> None:
        """Raise unless this BEiT was built for :meth:`forward_masked` (mask token, final norm, last block out)."""
        if self.mask_token is None:
            raise ValueError('the MIM backbone has no mask token; build beit_mm.BEiT with with_mask_token=True')
        if self.norm is None:
            raise ValueError('masked image modeling classifies final-normed tokens; build the backbone with '
                             'final_norm=True')
        if self.out_indices[-1] != self.num_layers - 1:
            raise ValueError(f'the last out index must be the last block ({self.num_layers - 1}), got '
                             f'out_indices={self.out_indices}; use out_indices=(-1,)')



def num_blocks(state_dict: Mapping[str, Tensor]) -> int:
    ids = {int(m.group(1)) for k in state_dict if (m := re.match(r'blocks\.(\d+)\.', k))}
    return max(ids) + 1 if ids else 0


def expand_shared_rel_pos_bias(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Copy a shared ``rel_pos_bias.relative_position_bias_table`` into every block (unilm fine-tuning)."""
    sd = dict(state_dict)
    table = sd.pop('rel_pos_bias.relative_position_bias_table', None)
    sd.pop('rel_pos_bias.relative_position_index', None)
    if table is not None:
        for i in range(num_blocks(sd)):
            sd.setdefault(f'blocks.{i}.attn.relative_position_bias_table', table.clone())
    return sd


def table_grid(table: Tensor) -> tuple[int, int]:
    """The square patch grid a relative position bias table was built for (rows = (2g-1)^2 + 3)."""
    side = math.isqrt(table.shape[0] - NUM_CLS_ROWS)
    if side * side != table.shape[0] - NUM_CLS_ROWS or side % 2 == 0:
        raise ValueError(f'a relative position bias table with {table.shape[0]} rows does not belong to a square grid')
    return ((side + 1) // 2, ) * 2


def resize_to_grid(state_dict: Mapping[str, Tensor], grid: tuple[int, int],
                   num_extra_tokens: int = 1) -> dict[str, Tensor]:
    """Resample every relative position bias table and the position embedding of a state dict to ``grid``.

    ``num_extra_tokens``: position-embedding rows before the grid (1: cls; 0: ``no_embed_class``).
    """
    out = {}
    for key, value in state_dict.items():
        if key.endswith('relative_position_bias_table'):
            value = resize_rel_pos_bias_table(value, table_grid(value), grid)
        elif key == 'pos_embed':
            side = math.isqrt(value.shape[1] - num_extra_tokens)
            value = resize_pos_embed(value, (side, side), grid, num_extra_tokens=num_extra_tokens)
        out[key] = value
    return out


def checkpoint_filter_fn(state_dict: Mapping[str, Tensor], model: 'BEiT') -> dict[str, Tensor]:
    """Fit a beit_mm state dict to ``model`` at load time: shared bias copied per block, tables
    and position embeddings resampled to its grid."""
    sd = {k: v for k, v in state_dict.items() if not k.endswith('relative_position_index')}
    if model.rel_pos_bias is None:
        sd = expand_shared_rel_pos_bias(sd)
    return resize_to_grid(sd, model.grid, num_extra_tokens=0 if model.no_embed_class else 1)
