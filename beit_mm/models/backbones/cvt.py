"""CvT backbone (Wu et al. 2021), with microsoft/CvT ``lib/models/cls_cvt.py`` parameter names.

Three stages of a convolutional token embedding and pre-norm blocks with conv-projection attention; a cls token in the
last stage only, no position embedding.
"""
import contextlib
from collections.abc import Iterator, Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from ...registry import MODELS
from ..layers.conv_attention import ConvProjectionAttention
from ..layers.mask_utils import conv_output_size, upsample_mask
from ..layers.mlp import Mlp
from .pretrained import load_pretrained_backbone

# Paper Table 2, official experiments/imagenet/cvt/*.yaml
ARCH_SETTINGS: dict[str, dict[str, list[int]]] = {
    'cvt-13': dict(embed_dims=[64, 192, 384], depths=[1, 2, 10], num_heads=[1, 3, 6]),
    'cvt-21': dict(embed_dims=[64, 192, 384], depths=[1, 4, 16], num_heads=[1, 3, 6]),
    'cvt-w24': dict(embed_dims=[192, 768, 1024], depths=[2, 2, 20], num_heads=[3, 12, 16]),
}
PATCH_KERNELS = (7, 3, 3)
PATCH_STRIDES = (4, 2, 2)
PATCH_PADDINGS = (2, 1, 1)
MLP_RATIO = 4
NUM_STAGES = 3


class QuickGELU(nn.Module):
    """``x * sigmoid(1.702 x)``, the activation of the official CvT code (HF's port uses exact GELU instead)."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(1.702 * x)


ACT_LAYERS: dict[str, type[nn.Module]] = {'quick_gelu': QuickGELU, 'gelu': nn.GELU}


class ConvEmbed(nn.Module):
    """Conv, then LayerNorm over channels: ``(B, C_in, H, W) -> ((B, H' * W', C), (H', W'))``."""

    def __init__(self, in_channels: int, embed_dims: int, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dims, kernel_size=kernel_size, stride=stride, padding=padding)
        self.norm = nn.LayerNorm(embed_dims)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        x = self.proj(x)
        hw_shape = (x.shape[2], x.shape[3])
        return self.norm(x.flatten(2).transpose(1, 2)), hw_shape


class CvTBlock(nn.Module):
    """Pre-norm block with conv-projection attention: ``(B, N, C) -> (B, N, C)``."""

    def __init__(self, embed_dims: int, num_heads: int, with_cls_token: bool, drop_path: float, act: str,
                 attn_impl: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dims)
        self.attn = ConvProjectionAttention(
            embed_dims, num_heads, with_cls_token=with_cls_token, attn_impl=attn_impl)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(embed_dims)
        self.mlp = Mlp(embed_dims, MLP_RATIO * embed_dims, act_layer=ACT_LAYERS[act])

    def forward(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), hw_shape))
        return x + self.drop_path(self.mlp(self.norm2(x)))


@contextlib.contextmanager
def _restore_batchnorm_buffers(module: nn.Module) -> Iterator[None]:
    """Restore the BatchNorm buffers of ``module`` after the body, so a checkpointed
    recomputation does not update the running statistics twice."""
    buffers = [b for m in module.modules() if isinstance(m, _BatchNorm) for b in m.buffers()]
    saved = [b.clone() for b in buffers]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, s in zip(buffers, saved):
                b.copy_(s)


class CvTStage(nn.Module):
    """Conv token embedding, optional mask and cls tokens, ``depth`` blocks.

    ``(B, C_in, H, W)``, mask ``(B, H', W')`` or None -> tokens ``(B, H' * W', C)``, cls ``(B, 1, C)`` or None,
    ``(H', W')``.
    """

    def __init__(self, in_channels: int, embed_dims: int, depth: int, num_heads: int, kernel_size: int, stride: int,
                 padding: int, with_cls_token: bool, drop_paths: Sequence[float], act: str, attn_impl: str,
                 with_cp: bool, with_mask_token: bool = False) -> None:
        super().__init__()
        self.with_cp = with_cp
        self.patch_embed = ConvEmbed(in_channels, embed_dims, kernel_size, stride, padding)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dims)) if with_cls_token else None
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dims)) if with_mask_token else None
        self.blocks = nn.ModuleList(
            CvTBlock(embed_dims, num_heads, with_cls_token, drop_paths[j], act, attn_impl) for j in range(depth))

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor], tuple[int, int]]:
        x, hw_shape = self.patch_embed(x)
        if mask is not None:
            if self.mask_token is None:
                raise ValueError('a mask was given but this CvT stage has no mask token; build CvT with '
                                 'with_mask_token=True')
            if tuple(mask.shape) != (x.shape[0], *hw_shape):
                raise ValueError(f'mask {tuple(mask.shape)} must be (B, H_0, W_0) = {(x.shape[0], *hw_shape)}, the '
                                 'stage-0 token grid; upsample a patch mask with '
                                 'beit_mm.models.layers.mask_utils.upsample_mask')
            x = torch.where(mask.reshape(x.shape[0], -1, 1).bool(), self.mask_token.to(x.dtype), x)
        if self.cls_token is not None:
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        for block in self.blocks:
            if self.with_cp and torch.is_grad_enabled():
                x = cp.checkpoint(
                    block,
                    x,
                    hw_shape,
                    use_reentrant=False,
                    context_fn=lambda blk=block: (contextlib.nullcontext(), _restore_batchnorm_buffers(blk)))
            else:
                x = block(x, hw_shape)
        if self.cls_token is None:
            return x, None, hw_shape
        return x[:, 1:], x[:, :1], hw_shape


def cvt_drop_path_rates(drop_path_rate: Union[float, Sequence[float]], depths: Sequence[int]) -> list[list[float]]:
    """Stochastic-depth rates per stage, ``linspace(0, rate_s, depth_s)``; a float applies to all stages."""
    rates = [float(drop_path_rate)] * len(depths) if isinstance(drop_path_rate, (int, float)) else list(drop_path_rate)
    if len(rates) != len(depths):
        raise ValueError(f'drop_path_rate={drop_path_rate!r} needs one rate per stage ({len(depths)}), as the official '
                         'MODEL.SPEC.DROP_PATH_RATE, e.g. (0.0, 0.0, 0.1)')
    return [torch.linspace(0, rate, depth, device='cpu').tolist() for rate, depth in zip(rates, depths)]


@MODELS.register_module()
class CvT(BaseModule):
    """Convolutional vision Transformer backbone.

    Args:
        arch: 'cvt-13', 'cvt-21', 'cvt-w24', or a dict of per-stage lists ``embed_dims``, ``depths``, ``num_heads``.
        in_channels: image channels.
        drop_path_rate: stochastic depth per stage (official ``MODEL.SPEC.DROP_PATH_RATE``) or one float for all.
        out_type: 'featmap' returns the maps of ``out_indices``; 'cls_token' returns ``(norm(cls),)``, (B, C_2).
        out_indices: levels 0-2 are the stage maps (B, C_s, H / 2^(s+2), W / 2^(s+2)); 3 is level 2 max-pooled 2x.
        final_norm: the final LayerNorm ``norm``: on the cls token ('cls_token', required) or on the stage-2 map.
        with_cp, norm_eval: activation checkpointing per block; conv-projection BatchNorms kept in eval mode.
        frozen_stages: freeze stages ``0..frozen_stages`` (2 also ``norm``); -1 freezes nothing.
        act: 'quick_gelu' (official checkpoints) or 'gelu' (HF port).
        attn_impl: ``'sdpa'`` or ``'eager'``; the same function.
        with_mask_token: learn ``stage0.mask_token`` (1, 1, C_0) for masked image modeling.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH, prefix=None)``; without it the official init.
    """

    #: FSDP units, as HF's ``_no_split_modules``.
    fsdp_wrap_units = (CvTBlock, )

    def __init__(self,
                 arch: Union[str, dict] = 'cvt-13',
                 in_channels: int = 3,
                 drop_path_rate: Union[float, Sequence[float]] = (0.0, 0.0, 0.1),
                 out_type: str = 'featmap',
                 out_indices: Sequence[int] = (0, 1, 2),
                 final_norm: bool = True,
                 with_cp: bool = False,
                 norm_eval: bool = False,
                 frozen_stages: int = -1,
                 act: str = 'quick_gelu',
                 attn_impl: str = 'sdpa',
                 with_mask_token: bool = False,
                 init_cfg: Optional[Union[dict, list]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if act not in ACT_LAYERS:
            raise ValueError(f"act={act!r} is not supported; use 'quick_gelu' (official CvT weights) or 'gelu' "
                             '(HF weights)')
        self.arch_settings = self._parse_arch(arch)
        embed_dims = self.arch_settings['embed_dims']
        depths = self.arch_settings['depths']
        num_heads = self.arch_settings['num_heads']
        self.depths = list(depths)
        self.embed_dims = list(embed_dims)

        if out_type not in ('featmap', 'cls_token'):
            raise ValueError(f"out_type={out_type!r} is not supported; use 'featmap' or 'cls_token'")
        if out_type == 'cls_token' and not final_norm:
            raise ValueError("out_type='cls_token' needs final_norm=True (the classifier input is norm(cls_token))")
        out_indices = tuple(out_indices)
        bad = [i for i in out_indices if i not in (0, 1, 2, 3)]
        if bad or not out_indices:
            raise ValueError(f'out_indices={out_indices} must be a non-empty subset of (0, 1, 2, 3) '
                             '(stage maps 0-2, 3 = stage-2 map max-pooled to stride 32)')
        if not -1 <= frozen_stages < NUM_STAGES:
            raise ValueError(f'frozen_stages={frozen_stages} must be in [-1, {NUM_STAGES - 1}]')
        self.out_type = out_type
        self.out_indices = out_indices
        self.norm_eval = norm_eval
        self.frozen_stages = frozen_stages

        dpr = cvt_drop_path_rates(drop_path_rate, depths)
        for s in range(NUM_STAGES):
            stage = CvTStage(
                in_channels=in_channels if s == 0 else embed_dims[s - 1],
                embed_dims=embed_dims[s],
                depth=depths[s],
                num_heads=num_heads[s],
                kernel_size=PATCH_KERNELS[s],
                stride=PATCH_STRIDES[s],
                padding=PATCH_PADDINGS[s],
                with_cls_token=s == NUM_STAGES - 1,
                drop_paths=dpr[s],
                act=act,
                attn_impl=attn_impl,
                with_cp=with_cp,
                with_mask_token=with_mask_token and s == 0)
            self.add_module(f'stage{s}', stage)
        self.norm = nn.LayerNorm(embed_dims[-1]) if final_norm else None

        self.apply(self._official_init)
        nn.init.trunc_normal_(self.stage2.cls_token, std=0.02)
        if with_mask_token:
            nn.init.trunc_normal_(self.stage0.mask_token, std=0.02)
        self._freeze_stages()

    @staticmethod
    def _parse_arch(arch: Union[str, dict]) -> dict[str, list[int]]:
        if isinstance(arch, str):
            if arch not in ARCH_SETTINGS:
                raise ValueError(f'unknown CvT arch {arch!r}; use one of {sorted(ARCH_SETTINGS)} or a dict with '
                                 "'embed_dims', 'depths', 'num_heads'")
            return {k: list(v) for k, v in ARCH_SETTINGS[arch].items()}
        keys = {'embed_dims', 'depths', 'num_heads'}
        if set(arch) != keys or any(len(arch[k]) != NUM_STAGES for k in keys):
            raise ValueError(f'a custom CvT arch needs exactly the keys {sorted(keys)}, each a list of '
                             f'{NUM_STAGES} ints; got {arch}')
        return {k: list(arch[k]) for k in keys}

    @staticmethod
    def _official_init(m: nn.Module) -> None:
        """microsoft/CvT ``_init_weights_trunc_normal``: Linear trunc-normal(0.02), zero bias, unit norms."""
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.LayerNorm, _BatchNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def init_weights(self) -> None:
        """The official init, or a beit_mm checkpoint; missing backbone weights raise, unused keys warn."""
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            load_pretrained_backbone(
                self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                convert_hint='Convert official files first: python tools/convert_checkpoint.py --model cvt --source '
                '{official,hf} SRC DST (both are QuickGELU-trained: keep act=\'quick_gelu\'); a beit_mm classifier or '
                'segmentor checkpoint '
                "needs init_cfg.prefix='backbone.'.")
            self._is_init = True
            return
        super().init_weights()

    def _freeze_stages(self) -> None:
        frozen: list[nn.Module] = [getattr(self, f'stage{s}') for s in range(self.frozen_stages + 1)]
        if self.frozen_stages == NUM_STAGES - 1 and self.norm is not None:
            frozen.append(self.norm)
        for module in frozen:
            module.eval()
            for p in module.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> 'CvT':
        """Sets the mode, then re-applies ``frozen_stages`` and ``norm_eval``."""
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> tuple[Tensor, ...]:
        """(B, C, H, W) -> the maps of ``out_indices`` ('featmap'), or ``(norm(cls),)`` (B, C_2).

        ``mask`` (B, H_0, W_0) bool, True = masked, swaps stage-0 tokens for ``stage0.mask_token``. Level sizes:
        ``H_0 = (H - 3) // 4 + 1``, ``H_{s+1} = (H_s - 1) // 2 + 1``, level 3 ``max_pool2d(level 2, 2)``.
        """
        maps, cls_token = self._stage_maps(x, mask, norm_last=self.out_type == 'featmap')
        if self.out_type == 'cls_token':
            return (self.norm(cls_token).squeeze(1), )
        maps.append(F.max_pool2d(maps[-1], kernel_size=2, stride=2))
        return tuple(maps[i] for i in self.out_indices)

    def _stage_maps(self, x: Tensor, mask: Optional[Tensor], norm_last: bool) -> tuple[list[Tensor], Tensor]:
        """The stage maps (B, C_s, H_s, W_s), the last final-normed if ``norm_last``, and the cls token."""
        maps: list[Tensor] = []
        cls_token: Optional[Tensor] = None
        for s in range(NUM_STAGES):
            tokens, cls_token, (h, w) = getattr(self, f'stage{s}')(x, mask if s == 0 else None)
            if s == NUM_STAGES - 1 and norm_last and self.norm is not None:
                tokens = self.norm(tokens)
            x = tokens.transpose(1, 2).reshape(tokens.shape[0], -1, h, w)
            maps.append(x)
        return maps, cls_token

    def dense_features(self, x: Tensor, layers: Optional[Sequence[int]] = None) -> list[Tensor]:
        """The stage maps ``layers`` (of 0, 1, 2; None: all), the last final-normed: the probe interface."""
        layers = tuple(range(NUM_STAGES)) if layers is None else tuple(layers)
        if not layers or any(i not in range(-NUM_STAGES, NUM_STAGES) for i in layers):
            raise ValueError(f'layers {layers} must be CvT stage indices 0..{NUM_STAGES - 1}')
        maps, _ = self._stage_maps(x, None, norm_last=True)
        return [maps[i] for i in sorted({i % NUM_STAGES for i in layers})]

    def stage0_grid(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """(H_0, W_0) of the stage-0 token embedding for (H, W) images (56x56 for 224x224)."""
        conv = self.stage0.patch_embed.proj
        return tuple(conv_output_size(n, conv.kernel_size[i], conv.stride[i], conv.padding[i])
                     for i, n in enumerate(image_size))

    @property
    def masked_token_dims(self) -> int:
        return self.embed_dims[-1]

    def forward_masked(self, x: Tensor, mask: Tensor) -> Tensor:
        """Final-normed stage-2 tokens with the masked stage-0 tokens replaced.

        Args:
            x: (B, 3, H, W) images.
            mask: (B, H/16, W/16) bool, True = masked; upsampled (nearest) to the stage-0 grid.
        Returns:
            (B, H/16 * W/16, C_2), row-major like the mask.
        """
        self.check_forward_masked()
        feat = self(x, upsample_mask(mask, self.stage0_grid(x.shape[2:])))[-1]  # (B, C_2, h_2, w_2)
        if feat.shape[2:] != mask.shape[1:]:
            raise ValueError(f'the stage-2 grid {tuple(feat.shape[2:])} differs from the mask grid '
                             f'{tuple(mask.shape[1:])}; CvT MIM needs 16 px mask patches (mask generator '
                             'input_size = image size // 16)')
        return feat.flatten(2).transpose(1, 2)

    def check_forward_masked(self) -> None:
        """Raise unless this CvT was built for :meth:`forward_masked` (mask token, stage-2 map out, final norm)."""
        if self.stage0.mask_token is None:
            raise ValueError('the MIM backbone has no mask token; build beit_mm.CvT with with_mask_token=True')
        if self.out_type != 'featmap' or tuple(self.out_indices) != (2, ):
            raise ValueError(f"CvT MIM predicts from the stage-2 map; build the backbone with out_type='featmap', "
                             f'out_indices=(2,) (got {self.out_type!r}, {self.out_indices})')
        if self.norm is None:
            raise ValueError('CvT MIM classifies final-normed stage-2 tokens; build the backbone with final_norm=True')

    def get_layer_depth(self, param_name: str, prefix: str = '') -> tuple[int, int]:
        """Layer id for layer-wise lr decay and the id count ``sum(depths) + 2``.

        Stage s's embedding -> ``sum(depths[:s])``, its block j -> that + j + 1, the rest -> ``num_layers - 1``.
        """
        num_layers = sum(self.depths) + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        parts = param_name[len(prefix):].split('.')
        if len(parts) < 2 or not parts[0].startswith('stage') or not parts[0][5:].isdigit():
            return num_layers - 1, num_layers
        s = int(parts[0][5:])
        if not 0 <= s < NUM_STAGES:
            return num_layers - 1, num_layers
        offset = sum(self.depths[:s])
        if parts[1] == 'blocks' and len(parts) > 2 and parts[2].isdigit():
            return offset + int(parts[2]) + 1, num_layers
        if parts[1] in ('patch_embed', 'cls_token', 'mask_token'):
            return offset, num_layers
        return num_layers - 1, num_layers
