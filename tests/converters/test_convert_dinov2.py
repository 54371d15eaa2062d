"""timm DINOv2 with registers -> DINOv2-style beit_mm.BEiT at another patch and image size (EoMT's start:
tue-mps/eomt models/vit.py:33-39). Reference: timm 1.0.31 loading the same random file into a patch-16, 64-px model
through its ``checkpoint_filter_fn``; final-normed tokens, fp32 max |diff| <= 1e-4."""

import pytest
import torch
from timm.layers import resample_patch_embed
from timm.models.vision_transformer import VisionTransformer, checkpoint_filter_fn

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.converters.dinov2 import convert_dinov2, pi_resize_patch_embed
from beit_mm.models.backbones import BEiT


TIMM_KW = dict(embed_dim=64, depth=2, num_heads=4, init_values=1e-5, reg_tokens=4, no_embed_class=True, num_classes=0)


def timm_dinov2_reg4(img_size: int = 70, patch_size: int = 14) -> VisionTransformer:
    torch.manual_seed(0)
    model = VisionTransformer(img_size=img_size, patch_size=patch_size, **TIMM_KW)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'gamma' in name or name.endswith('bias') or 'reg_token' in name:
                p.copy_(torch.randn_like(p) * 0.5)
    return model


def dinov2_style_beit(img_size: int = 64) -> BEiT:
    return BEiT(arch=dict(embed_dims=64, num_layers=2, num_heads=4, mlp_ratio=4.0), img_size=img_size, patch_size=16,
                use_abs_pos_emb=True, no_embed_class=True, num_register_tokens=4, use_rel_pos_bias=False,
                layer_scale_init_value=1e-5, drop_path_rate=0.0, final_norm=True).eval()


def test_pi_resize_equals_timm():
    w = torch.randn(8, 3, 14, 14)
    diff = (pi_resize_patch_embed(w, (16, 16)) - resample_patch_embed(w, (16, 16))).abs().max().item()
    assert diff <= 1e-5 * w.abs().max().item(), diff


def test_converted_dinov2_gives_timms_tokens(tmp_path):
    src = timm_dinov2_reg4()
    path, dst = tmp_path / 'dinov2.pth', tmp_path / 'beit.pth'
    torch.save(src.state_dict(), path)
    convert_checkpoint(str(path), str(dst), model='dinov2', source='timm', img_size=64, patch_size=16)
    ref = VisionTransformer(img_size=64, patch_size=16, **TIMM_KW).eval()
    ref.load_state_dict(checkpoint_filter_fn(src.state_dict(), ref), strict=True)
    ours = dinov2_style_beit()
    ours.load_state_dict(torch.load(dst)['state_dict'], strict=True)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        a, b = ref.forward_features(x), ours.forward_tokens(x)[0][-1]
    assert a.shape == b.shape == (2, 1 + 4 + 16, 64)
    diff = (a - b).abs().max().item()
    assert diff <= 1e-4, f'max |diff| {diff:.3g} (max |ref| {a.abs().max():.3g})'


def test_other_layouts_are_refused():
    sd = timm_dinov2_reg4().state_dict()
    with pytest.raises(ValueError, match='needs --img-size|not a multiple'):
        convert_dinov2(sd, 70, 16)
    no_reg = {k: v for k, v in sd.items() if k != 'reg_token'}
    with pytest.raises(ValueError, match='not a timm DINOv2-with-registers'):
        convert_dinov2(no_reg, 64, 16)
    swiglu = dict(sd, **{'blocks.0.mlp.w12.weight': torch.zeros(1)})
    with pytest.raises(ValueError, match="no beit_mm counterpart.*'blocks.0.mlp.w12.weight'"):
        convert_dinov2(swiglu, 64, 16)
