"""timm DINOv2 with registers -> a DINOv2-style ``beit_mm.BEiT`` at another patch and image size, as EoMT builds
it (tue-mps/eomt@7bd19dd ``models/vit.py:33-39``; timm 1.0.31's ``checkpoint_filter_fn``)."""
from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor


def _resize_matrix(old: tuple[int, int], new: tuple[int, int]) -> Tensor:
    """(new_h * new_w, old_h * old_w) float64: column j is basis image j resized bicubic with antialias."""
    basis = torch.eye(old[0] * old[1], dtype=torch.float64).reshape(-1, 1, *old)
    resized = F.interpolate(basis.float(), size=new, mode='bicubic', antialias=True, align_corners=False)
    return resized.double().reshape(old[0] * old[1], -1).T


def pi_resize_patch_embed(weight: Tensor, new: tuple[int, int]) -> Tensor:
    """Patch kernel (C, in, h, w) -> (C, in, H, W) keeping ``<resize(x), w'> = <x, w>``.

    ``w' = pinv(B^T) w`` for the bicubic resize B (FlexiViT, Beyer et al. 2023, eq. 3; timm ``resample_patch_embed``).
    """
    old = tuple(weight.shape[-2:])
    if old == tuple(new):
        return weight
    resize = _resize_matrix(old, tuple(new))  # (H*W, h*w)
    pinv = torch.linalg.pinv(resize.T)  # (H*W, h*w)
    out = weight.double().reshape(-1, old[0] * old[1]) @ pinv.T
    return out.reshape(*weight.shape[:2], *new).to(weight.dtype)


def resize_grid_embed(pos_embed: Tensor, new: tuple[int, int]) -> Tensor:
    """Patch-only position embedding (1, h*w, C) of a square grid -> (1, H*W, C), bicubic with antialias."""
    n = pos_embed.shape[1]
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f'position embedding of {n} tokens is not a square grid (a cls row? this converter takes '
                         'timm DINOv2 with registers, whose pos_embed covers the patches only)')
    if (side, side) == tuple(new):
        return pos_embed
    grid = pos_embed.float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=new, mode='bicubic', antialias=True, align_corners=False)
    return grid.permute(0, 2, 3, 1).reshape(1, new[0] * new[1], -1).to(pos_embed.dtype)


def convert_dinov2(state_dict: Mapping[str, Tensor], img_size: int, patch_size: int) -> dict[str, Tensor]:
    """A timm DINOv2 (registers) state dict -> a ``beit_mm.BEiT`` one for ``img_size`` px in ``patch_size``
    px patches; ValueError for another layout."""
    sd = dict(state_dict)
    if 'reg_token' not in sd or 'blocks.0.attn.qkv.weight' not in sd:
        raise ValueError('not a timm DINOv2-with-registers state dict (no reg_token / blocks.0.attn.qkv.weight); '
                         'download timm/vit_*_patch14_reg4_dinov2.lvd142m')
    if img_size % patch_size:
        raise ValueError(f'img_size {img_size} is not a multiple of patch_size {patch_size}')
    grid = (img_size // patch_size, ) * 2
    out = {'cls_token': sd.pop('cls_token'), 'reg_token': sd.pop('reg_token'),
           'pos_embed': resize_grid_embed(sd.pop('pos_embed'), grid),
           'patch_embed.proj.weight': pi_resize_patch_embed(sd.pop('patch_embed.proj.weight'),
                                                            (patch_size, patch_size)),
           'patch_embed.proj.bias': sd.pop('patch_embed.proj.bias')}
    for key in [k for k in sd if k.startswith('blocks.')]:
        i, rest = key.split('.', 2)[1:]
        p = f'blocks.{i}.'
        if rest == 'attn.qkv.bias':
            q, _, v = sd.pop(key).chunk(3)
            out[p + 'attn.q_bias'], out[p + 'attn.v_bias'] = q, v
        elif rest in ('ls1.gamma', 'ls2.gamma'):
            out[p + f'gamma_{rest[2]}'] = sd.pop(key)
        elif rest.split('.')[0] in ('norm1', 'norm2', 'attn', 'mlp') and not rest.startswith('mlp.w'):
            out[key] = sd.pop(key)
    for key in ('norm.weight', 'norm.bias'):
        if key in sd:
            out[key] = sd.pop(key)
    sd.pop('mask_token', None)  # DINOv2's iBOT mask token, unused by a fine-tuned backbone
    if sd:
        raise ValueError(f'{len(sd)} DINOv2 keys have no beit_mm counterpart (first: {sorted(sd)[:5]}); beit_mm holds '
                         'DINOv2 ViTs with a GELU MLP (S/B/L), not the SwiGLU of ViT-g')
    return out
