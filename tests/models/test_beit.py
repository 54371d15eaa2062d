"""BEiT backbone vs HF transformers' BeitModel (reference) with the same random weights, and behaviour tests."""
import pytest
import torch
from transformers import BeitConfig, BeitModel

from beit_mm.converters.beit import convert_beit
from beit_mm.models.backbones import BEiT

from ..conftest import randomize_

TOL = 1e-4  # fp32 max abs difference against the reference


def hf_beit(img_size=48, patch=8, layers=3, dim=32, heads=2, abs_pos=False, rel=True, shared=False, ls=0.1,
            mask_token=False) -> BeitModel:
    cfg = BeitConfig(image_size=img_size, patch_size=patch, num_hidden_layers=layers, hidden_size=dim,
                     num_attention_heads=heads, intermediate_size=dim * 2, use_absolute_position_embeddings=abs_pos,
                     use_relative_position_bias=rel, use_shared_relative_position_bias=shared,
                     layer_scale_init_value=ls, use_mean_pooling=False, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, drop_path_rate=0.0, use_mask_token=mask_token)
    return randomize_(BeitModel(cfg, add_pooling_layer=False)).eval()


def ours_like(hf: BeitModel, **kw) -> BEiT:
    c = hf.config
    return BEiT(arch=dict(embed_dims=c.hidden_size, num_layers=c.num_hidden_layers, num_heads=c.num_attention_heads,
                          mlp_ratio=c.intermediate_size / c.hidden_size),
                img_size=c.image_size, patch_size=c.patch_size, use_abs_pos_emb=c.use_absolute_position_embeddings,
                use_rel_pos_bias=c.use_relative_position_bias,
                use_shared_rel_pos_bias=c.use_shared_relative_position_bias,
                layer_scale_init_value=c.layer_scale_init_value, drop_path_rate=0.0,
                out_indices=tuple(range(c.num_hidden_layers)), **kw).eval()


@pytest.mark.parametrize('variant', [
    dict(rel=True, shared=False, ls=0.1),  # fine-tuned layout: per-block bias, layer scale
    dict(rel=False, shared=True, ls=0.1),  # pretraining layout: one shared bias
    dict(rel=False, shared=False, abs_pos=True, ls=0.0),  # ViT-like: absolute position embedding, no layer scale
    dict(rel=True, shared=False, ls=0.1, img_size=64, patch=16),  # 4x4 grid
])
def test_hf_parity_block_outputs(variant):
    """Every block's output (cls + patch tokens) equals HF BeitModel's hidden states, fp32 max|diff| <= 1e-4."""
    hf = hf_beit(**variant)
    ours = ours_like(hf, final_norm=True)
    sd = convert_beit(hf.state_dict(), 'hf', expand_shared_bias=False)
    ours.load_state_dict(sd, strict=True)
    x = torch.randn(2, 3, hf.config.image_size, hf.config.image_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(x, output_hidden_states=True)
        tokens, _ = ours.forward_tokens(x)
    for i, t in enumerate(tokens[:-1]):
        assert (t - ref.hidden_states[i + 1]).abs().max() < TOL, f'block {i}'
    # the last block output goes through the final norm in both
    assert (tokens[-1] - ref.last_hidden_state).abs().max() < TOL


def test_hf_parity_with_mask_token():
    """Masked patches replaced by the mask token: equal to HF's bool_masked_pos path (no abs pos emb, where HF adds
    the position embedding before masking and unilm after)."""
    hf = hf_beit(rel=False, shared=True, mask_token=True)
    ours = ours_like(hf, final_norm=True, with_mask_token=True)
    ours.load_state_dict(convert_beit(hf.state_dict(), 'hf', expand_shared_bias=False, keep_mim_head=True), strict=True)
    x = torch.randn(2, 3, 48, 48)
    mask = torch.rand(2, 36, generator=torch.Generator().manual_seed(3)) < 0.4
    with torch.no_grad():
        ref = hf(x, bool_masked_pos=mask).last_hidden_state
        tokens, _ = ours.forward_tokens(x, mask.view(2, 6, 6))
    assert (tokens[-1] - ref).abs().max() < TOL


def test_expanded_shared_bias_equals_shared():
    """Copying the shared bias into every block (unilm fine-tuning) computes the same function."""
    hf = hf_beit(rel=False, shared=True)
    shared = ours_like(hf, final_norm=True)
    shared.load_state_dict(convert_beit(hf.state_dict(), 'hf', expand_shared_bias=False), strict=True)
    per_block = BEiT(arch=dict(embed_dims=32, num_layers=3, num_heads=2, mlp_ratio=2.0), img_size=48, patch_size=8,
                     use_rel_pos_bias=True, drop_path_rate=0.0, out_indices=(0, 1, 2), final_norm=True).eval()
    per_block.load_state_dict(convert_beit(hf.state_dict(), 'hf'), strict=True)
    x = torch.randn(1, 3, 48, 48)
    with torch.no_grad():
        for a, b in zip(shared(x), per_block(x)):
            assert (a - b).abs().max() < 1e-5


def test_a_size_not_divisible_by_the_patch_is_refused():
    m = BEiT(arch=dict(embed_dims=32, num_layers=1, num_heads=2, mlp_ratio=2.0), img_size=64)
    with pytest.raises(ValueError, match='not divisible by the patch size'):
        m(torch.randn(1, 3, 60, 64))


def test_drop_path_schedule_linear():
    m = BEiT(arch=dict(embed_dims=32, num_layers=5, num_heads=2, mlp_ratio=2.0), img_size=32, drop_path_rate=0.4,
             out_indices=(4,))
    rates = [getattr(b.drop_path, 'drop_prob', 0.0) for b in m.blocks]
    assert rates == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])


def test_registers_need_a_dinov2_style_vit_and_count_as_embeddings():
    """Register tokens (the DINOv2-style EoMT backbone; parity with HF's EoMT in tests/models/test_eomt_hf.py): refused beside
    a relative position bias or a cls-row position embedding, layer id 0 for layer decay, dropped from the maps."""
    arch = dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=4.0)
    for bad in (dict(use_rel_pos_bias=True), dict(use_rel_pos_bias=False, use_abs_pos_emb=True)):
        with pytest.raises(ValueError, match='num_register_tokens=4 needs use_rel_pos_bias=False'):
            BEiT(arch=arch, img_size=32, num_register_tokens=4, **bad)
    m = BEiT(arch=arch, img_size=32, num_register_tokens=4, use_rel_pos_bias=False, use_abs_pos_emb=True,
             no_embed_class=True, out_indices=(0, 1))
    assert m.pos_embed.shape == (1, 4, 32) and m.reg_token.shape == (1, 4, 32)
    assert m.get_layer_depth('reg_token') == (0, 4)
    tokens, _ = m.forward_tokens(torch.randn(2, 3, 32, 32))
    assert tokens[-1].shape == (2, 1 + 4 + 4, 32)
    assert [tuple(f.shape) for f in m(torch.randn(2, 3, 32, 32))] == [(2, 32, 2, 2)] * 2
