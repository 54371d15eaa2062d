"""DINOv3 ViT backbone (Siméoni et al., 2025; facebookresearch/dinov3 @ 6876159 ``models/vision_transformer.py``).

A plain ViT whose blocks rotate the patch tokens' queries and keys by 2-D RoPE, so it runs at any size divisible by
the patch; tokens ``[cls, R storage tokens, patches]``; names as beit_mm's BEiT.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence

import torch
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch import Tensor, nn

from ...fileio.checkpoint import checkpoint_meta
from ...fileio.names import shown
from ...registry import MODELS
from ..layers.dinov3_block import DINOv3Block
from ..layers.rope import RopePositionEmbedding
from .beit import PatchEmbed
from .pretrained import load_pretrained_backbone
from .token_maps import TokenMapsMixin

#: The LVD-1689M ViTs (dinov3/hub/backbones.py).
ARCHS: dict[str, dict] = {
    'small': dict(embed_dims=384, num_layers=12, num_heads=6, mlp_ratio=4.0, ffn='mlp'),
    'base': dict(embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4.0, ffn='mlp'),
    'large': dict(embed_dims=1024, num_layers=24, num_heads=16, mlp_ratio=4.0, ffn='mlp'),
    'huge-plus': dict(embed_dims=1280, num_layers=32, num_heads=20, mlp_ratio=6.0, ffn='swiglu', swiglu_align=8),
    '7b': dict(embed_dims=4096, num_layers=40, num_heads=32, mlp_ratio=3.0, ffn='swiglu', swiglu_align=64,
               qv_bias=False),
}
_ARCH_KEYS = {'embed_dims', 'num_layers', 'num_heads', 'mlp_ratio'}
_ARCH_OPTIONAL = {'ffn': 'mlp', 'swiglu_align': 8, 'qv_bias': True}
#: What a converted checkpoint declares in ``meta['dinov3']`` and the weights' shapes do not show; a DINOv3 built
#: with another value refuses to load it (:func:`check_settings`).
SETTINGS = ('patch_size', 'num_heads', 'num_register_tokens', 'rope_base', 'rope_min_period', 'rope_max_period',
            'rope_normalize_coords', 'norm_eps')


@MODELS.register_module()
class DINOv3(TokenMapsMixin, BaseModule):
    """DINOv3 vision transformer returning multi-level feature maps.

    Args:
        arch: 'small' | 'base' | 'large' | 'huge-plus' | '7b', or a dict of ``embed_dims``, ``num_layers``,
            ``num_heads``, ``mlp_ratio`` and optionally ``ffn`` ('mlp' | 'swiglu'), ``swiglu_align``, ``qv_bias``.
        img_size, patch_size, in_channels: the training size (RoPE has no grid), patch side, input channels.
        num_register_tokens: ``R`` storage tokens ``reg_token`` (1, R, C).
        layer_scale_init_value: initial layer scale; 0 disables it.
        rope_*: the rotary periods and coordinates, and RoPE's training-time coordinate augmentations.
        norm_eps: LayerNorm epsilon.
        drop_rate, attn_drop_rate, drop_path_rate, out_indices, final_norm, with_mask_token, with_cp: as ``BEiT``'s.
        attn_impl: ``'auto'`` | ``'sdpa'`` | ``'eager'``; the same function.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH, prefix=None)``; missing backbone weights raise, and
            so does a file whose ``meta['dinov3']`` declares other :data:`SETTINGS` than these.
    """

    #: FSDP units.
    fsdp_wrap_units = (DINOv3Block, )

    def __init__(self,
                 arch: str | dict = 'large',
                 img_size: int | Sequence[int] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 num_register_tokens: int = 4,
                 layer_scale_init_value: float = 1e-5,
                 rope_base: float | None = 100.0,
                 rope_min_period: float | None = None,
                 rope_max_period: float | None = None,
                 rope_normalize_coords: str = 'separate',
                 rope_shift_coords: float | None = None,
                 rope_jitter_coords: float | None = None,
                 rope_rescale_coords: float | None = 2.0,
                 norm_eps: float = 1e-5,
                 drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.0,
                 out_indices: Sequence[int] = (-1, ),
                 final_norm: bool = True,
                 with_mask_token: bool = False,
                 with_cp: bool = False,
                 attn_impl: str = 'auto',
                 init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if isinstance(arch, str):
            if arch not in ARCHS:
                raise ValueError(f'unknown DINOv3 arch {arch!r}; choose one of {sorted(ARCHS)} or pass a dict')
            arch = ARCHS[arch]
        missing = _ARCH_KEYS - set(arch)
        if missing or set(arch) - _ARCH_KEYS - set(_ARCH_OPTIONAL):
            raise ValueError(f'DINOv3 arch dict {arch} needs {sorted(_ARCH_KEYS)} and may have '
                             f'{sorted(_ARCH_OPTIONAL)}')
        arch = {**_ARCH_OPTIONAL, **arch}
        if num_register_tokens < 0:
            raise ValueError(f'num_register_tokens={num_register_tokens} must be >= 0')
        self.embed_dims = embed_dims = arch['embed_dims']
        self.num_layers = num_layers = arch['num_layers']
        self.num_heads = arch['num_heads']
        img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        self.patch_size = patch_size
        self.grid = (img_size[0] // patch_size, img_size[1] // patch_size)
        self.num_prefix_tokens = 1 + num_register_tokens
        self.layer_scale_init_value = layer_scale_init_value
        self.settings = dict(patch_size=patch_size, num_heads=arch['num_heads'],
                             num_register_tokens=num_register_tokens, rope_base=rope_base,
                             rope_min_period=rope_min_period, rope_max_period=rope_max_period,
                             rope_normalize_coords=rope_normalize_coords, norm_eps=norm_eps)

        self.patch_embed = PatchEmbed(in_channels, embed_dims, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.reg_token = nn.Parameter(torch.zeros(1, num_register_tokens, embed_dims)) if num_register_tokens else None
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dims)) if with_mask_token else None
        self.rope = RopePositionEmbedding(embed_dims // self.num_heads, rope_base, rope_min_period, rope_max_period,
                                          rope_normalize_coords, rope_shift_coords, rope_jitter_coords,
                                          rope_rescale_coords)
        self.pos_drop = nn.Dropout(drop_rate)
        dpr = torch.linspace(0, drop_path_rate, num_layers).tolist()
        self.blocks = nn.ModuleList([
            DINOv3Block(embed_dims, self.num_heads, arch['mlp_ratio'], ffn=arch['ffn'],
                        swiglu_align=arch['swiglu_align'], qv_bias=arch['qv_bias'],
                        layer_scale_init_value=layer_scale_init_value, drop_path=dpr[i], attn_drop=attn_drop_rate,
                        drop=drop_rate, attn_impl=attn_impl, norm_eps=norm_eps) for i in range(num_layers)
        ])
        if any(not -num_layers <= i < num_layers for i in out_indices):
            raise ValueError(f'out_indices {tuple(out_indices)} out of range for {num_layers} blocks')
        self.out_indices = tuple(i % num_layers for i in out_indices)
        self.norm = nn.LayerNorm(embed_dims, eps=norm_eps) if final_norm else None
        self.with_cp = with_cp

    def init_weights(self) -> None:
        """DINOv3's random initialization (``init_weights``), or the checkpoint of ``init_cfg``."""
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            load_pretrained_backbone(
                self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                convert_hint='Convert DINOv3 files first: python tools/convert_checkpoint.py --model dinov3 '
                '--source {official,hf} SRC DST.')
            declared = checkpoint_meta(self.init_cfg['checkpoint']).get('dinov3')
            if declared is not None:
                check_settings(declared, self.settings, self.init_cfg['checkpoint'], 'the DINOv3 loading it',
                               "the DINOv3's config (model.backbone of a segmentor)")
            self._is_init = True
            return
        super().init_weights()
        self._init_random()

    def _init_random(self) -> None:
        """facebookresearch/dinov3 ``init_weights``: normal(0.02) tokens, trunc_normal(0.02) Linear."""
        with torch.no_grad():
            nn.init.normal_(self.cls_token, std=0.02)
            if self.reg_token is not None:
                nn.init.normal_(self.reg_token, std=0.02)
            if self.mask_token is not None:
                nn.init.zeros_(self.mask_token)
            bound = 1 / math.sqrt(self.patch_embed.proj.in_channels * self.patch_size ** 2)
            nn.init.uniform_(self.patch_embed.proj.weight, -bound, bound)
            nn.init.uniform_(self.patch_embed.proj.bias, -bound, bound)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.trunc_normal_(m.weight, std=0.02)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
                elif isinstance(m, nn.LayerNorm):
                    m.reset_parameters()
            for blk in self.blocks:
                for gamma in (blk.gamma_1, blk.gamma_2):
                    if gamma is not None:
                        gamma.fill_(self.layer_scale_init_value)
                for bias in (blk.attn.q_bias, blk.attn.v_bias):
                    if bias is not None:
                        bias.zero_()

    def embed(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, tuple[int, int]]:
        """(B, 3, H, W) -> tokens (B, 1 + R + h*w, C) and the grid (h, w); ``mask`` True = ``mask_token``."""
        x = self.patch_embed(x)
        grid = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        b, n, _ = x.shape
        if mask is not None:
            if self.mask_token is None:
                raise ValueError('a mask was given but this DINOv3 has no mask token; build it with '
                                 'with_mask_token=True')
            x = torch.where(mask.reshape(b, n, 1), self.mask_token.to(x.dtype), x)
        prefix = [self.cls_token.expand(b, -1, -1)]
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(b, -1, -1))
        return self.pos_drop(torch.cat(prefix + [x], dim=1)), grid

    def position_encoding(self, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """RoPE's (sin, cos), (h*w, D) each, for the grid (h, w); augmented anew at each call in training."""
        return self.rope(grid)

    def forward_tokens(self, x: Tensor, mask: Tensor | None = None,
                       out_indices: Sequence[int] | None = None) -> tuple[list[Tensor], tuple[int, int]]:
        """Token sequences (B, 1 + R + h*w, C) of the ``out_indices`` blocks (the last final-normed)
        and the grid (h, w)."""
        out_indices = self.out_indices if out_indices is None else out_indices
        x, grid = self.embed(x, mask)
        outs = []
        for i, blk in enumerate(self.blocks):
            rope = self.position_encoding(grid)
            if self.with_cp and x.requires_grad:
                x = cp.checkpoint(blk, x, grid, rope, use_reentrant=False)
            else:
                x = blk(x, grid, rope)
            if i == self.num_layers - 1 and self.norm is not None:
                x = self.norm(x)
            if i in out_indices:
                outs.append(x)
        return outs, grid


def config_settings(cfg: Mapping) -> dict:
    """The :data:`SETTINGS` of the DINOv3 a config dict (``type='beit_mm.DINOv3'`` and its keywords) builds."""
    params = inspect.signature(DINOv3.__init__).parameters
    kwargs = {name: cfg.get(name, p.default) for name, p in params.items() if name != 'self'}
    arch = ARCHS[kwargs['arch']] if isinstance(kwargs['arch'], str) else kwargs['arch']
    return {name: arch['num_heads'] if name == 'num_heads' else kwargs[name] for name in SETTINGS}


def check_settings(declared: Mapping, target: Mapping, source: str, target_name: str, where: str) -> None:
    """Raise unless a checkpoint's ``declared`` settings equal the ``target`` DINOv3's (floats to 1e-6 relative).

    Args:
        declared: ``meta['dinov3']`` of the checkpoint ``source``.
        target: the :data:`SETTINGS` of the DINOv3 that would load it (``DINOv3.settings``, :func:`config_settings`).
        target_name, where: the model's name in the message, and the config dict its settings are keys of.

    Raises:
        ValueError: naming every setting that differs, both values and the fix.
    """
    wrong = [(k, v, target[k]) for k, v in declared.items() if k in target and not _same(v, target[k])]
    if wrong:
        keys = {'num_heads': 'arch num_heads'}
        told = '; '.join(f'{keys.get(k, k)}: the checkpoint {v!r}, {target_name} {t!r}' for k, v, t in wrong)
        fix = ', '.join(f'{keys.get(k, k)}={v!r}' for k, v, _ in wrong)
        raise ValueError(f'{shown(source)} was converted from a DINOv3 built otherwise than {target_name} ({told}): '
                         'its weights would compute other features. Fix: set ' + fix + f' in {where} (the settings '
                         'the conversion printed), or use the checkpoint made for this config')


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-6)
    return a == b
