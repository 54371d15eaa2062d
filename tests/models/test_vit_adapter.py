"""ViT-Adapter on BEiT (beit_mm.BEiTAdapter): the official parameter layout, the deformable attention, behaviour, the
converter. Parity with the official modules on the same weights is run outside the repository (the project cannot
contain that code): docs/studies/vit-adapter-parity.md has the command and the numbers."""
import math

import pytest
import torch
from mmcv.ops.multi_scale_deform_attn import multi_scale_deformable_attn_pytorch

from beit_mm.converters.vit_adapter import convert_vit_adapter
from beit_mm.models.backbones import BEiT, BEiTAdapter
from beit_mm.models.backbones.beit_adapter import ADAPTER_WEIGHTS
from beit_mm.models.layers.vit_adapter import Extractor, Injector, deform_inputs, prior_shapes

OFFICIAL = 'czczup/ViT-Adapter@fd64a51 segmentation/mmseg_custom/models/backbones/'
# The tiny model of these facts: official BEiTAdapter(img_size=(64, 96), embed_dim=96, depth=4, num_heads=3,
# qkv_bias=True, init_values=1e-6, conv_inplane=16, n_points=4, deform_num_heads=3, cffn_ratio=0.25, deform_ratio=0.5,
# interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]]).
TINY = dict(arch=dict(embed_dims=96, num_layers=4, num_heads=3, mlp_ratio=4.0), img_size=(64, 96), conv_inplane=16,
            n_points=4, deform_num_heads=3, cffn_ratio=0.25, deform_ratio=0.5,
            interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]], norm_cfg=dict(type='BN'))

# Facts read off the official model's state_dict() (built from the files cited, run on fd64a51): 310 entries, of which
# 4 are the blocks' relative_position_index buffers, which beit_mm computes instead of storing.
OFFICIAL_NUM_ENTRIES = 310
OFFICIAL_ENTRIES_PER_PREFIX = {
    'cls_token': 1, 'level_embed': 1, 'patch_embed': 2, 'up': 2, 'spm': 44, 'norm1': 5, 'norm2': 5, 'norm3': 5,
    'norm4': 5, 'blocks.0': 17, 'blocks.3': 17, 'interactions.0': 33, 'interactions.1': 33, 'interactions.2': 33,
    'interactions.3': 73,  # + the two extra extractors of the last group (adapter_modules.py:206-212)
}
OFFICIAL_SHAPES = {
    'level_embed': (3, 96),  # beit_adapter.py:38
    'up.weight': (96, 96, 2, 2),  # beit_adapter.py:50
    'norm1.running_var': (96, ),  # beit_adapter.py:51 (SyncBatchNorm)
    'norm4.num_batches_tracked': (),  # beit_adapter.py:54
    'spm.stem.0.weight': (16, 3, 3, 3),  # adapter_modules.py:240-250 (conv, norm, relu) x 3 + max-pool
    'spm.stem.1.running_mean': (16, ),
    'spm.stem.6.weight': (16, 16, 3, 3),
    'spm.stem.7.bias': (16, ),
    'spm.conv2.0.weight': (32, 16, 3, 3),  # adapter_modules.py:252-256
    'spm.conv3.1.weight': (64, ),  # adapter_modules.py:257-261
    'spm.conv4.0.weight': (64, 64, 3, 3),  # adapter_modules.py:262-266
    'spm.fc1.weight': (96, 16, 1, 1),  # adapter_modules.py:267
    'spm.fc4.bias': (96, ),  # adapter_modules.py:270
    'interactions.0.injector.gamma': (96, ),  # adapter_modules.py:136
    'interactions.0.injector.query_norm.weight': (96, ),  # adapter_modules.py:132
    'interactions.0.injector.feat_norm.bias': (96, ),  # adapter_modules.py:133
    # ops/modules/ms_deform_attn.py:57-60 (detection/ops), 3 heads x 3 levels x 4 points (x 2), ratio 0.5
    'interactions.0.injector.attn.sampling_offsets.weight': (72, 96),
    'interactions.0.injector.attn.attention_weights.bias': (36, ),
    'interactions.0.injector.attn.value_proj.weight': (48, 96),
    'interactions.0.injector.attn.output_proj.weight': (96, 48),
    'interactions.1.extractor.attn.sampling_offsets.weight': (24, 96),  # 1 level
    'interactions.1.extractor.attn.attention_weights.weight': (12, 96),
    'interactions.1.extractor.ffn.fc1.weight': (24, 96),  # adapter_modules.py:56, 102 (cffn_ratio 0.25)
    'interactions.1.extractor.ffn.dwconv.dwconv.weight': (24, 1, 3, 3),  # adapter_modules.py:75
    'interactions.1.extractor.ffn.fc2.bias': (96, ),  # adapter_modules.py:59
    'interactions.1.extractor.ffn_norm.weight': (96, ),  # adapter_modules.py:103
    'interactions.3.extra_extractors.1.attn.value_proj.bias': (48, ),  # adapter_modules.py:207-212
    'interactions.3.extra_extractors.0.ffn.dwconv.dwconv.bias': (24, ),
    'blocks.0.attn.relative_position_bias_table': (80, 3),  # base/beit.py: (2*4-1)*(2*6-1)+3 rows, 3 heads
    'blocks.0.attn.q_bias': (96, ),
    'blocks.0.gamma_1': (96, ),
    'blocks.3.attn.qkv.weight': (288, 96),
    'patch_embed.proj.weight': (96, 3, 16, 16),
    'cls_token': (1, 1, 96),
}


def tiny(**kw) -> BEiTAdapter:
    torch.manual_seed(0)
    model = BEiTAdapter(**{**TINY, **kw})
    model.init_weights()
    return model


def randomize_(model: torch.nn.Module) -> None:
    """Move every weight away from its init (zero attention weights, gamma 1e-6) so that every path counts."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)


def official_layout(model: BEiTAdapter) -> dict:
    """``model``'s weights as an official ViT-Adapter UPerNet file holds them: ``backbone.`` + the blocks'
    relative_position_index buffers + heads."""
    sd = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    for i in range(model.num_layers):
        sd[f'backbone.blocks.{i}.attn.relative_position_index'] = torch.zeros(25, 25, dtype=torch.long)
    sd['decode_head.conv_seg.weight'] = torch.zeros(150, 32, 1, 1)
    sd['auxiliary_head.conv_seg.weight'] = torch.zeros(150, 16, 1, 1)
    return sd


def test_parameter_names_and_shapes_are_the_official_ones():
    sd = tiny().state_dict()
    assert len(sd) == OFFICIAL_NUM_ENTRIES - 4  # without the relative_position_index buffers
    for prefix, count in OFFICIAL_ENTRIES_PER_PREFIX.items():
        got = sum(1 for k in sd if k == prefix or k.startswith(prefix + '.'))
        buffers = 1 if prefix.startswith('blocks.') else 0  # the block's relative_position_index
        assert got == count - buffers, f'{prefix}: {got} entries, official {count} - {buffers}'
    for key, shape in OFFICIAL_SHAPES.items():
        assert tuple(sd[key].shape) == shape, key


def test_a_size_not_divisible_by_32_is_refused_with_the_fix():
    with pytest.raises(ValueError, match='divisible by 32.*size_divisor=32'):
        tiny()(torch.randn(1, 3, 64, 80))


@pytest.mark.parametrize('kw, match', [
    (dict(interaction_indexes=[[0, 1], [3, 3]]), 'covering blocks 0..3'),
    (dict(patch_size=8), 'patch_size=16'),
    (dict(use_abs_pos_emb=True), 'use_abs_pos_emb'),
])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        BEiTAdapter(**{**TINY, **kw})


def test_deform_inputs_reference_points_are_pixel_centres_x_then_y():
    (ref, shapes, start), (ref2, shapes2, start2) = deform_inputs((4, 6), torch.device('cpu'))
    assert shapes.tolist() == [[8, 12], [4, 6], [2, 3]] and start.tolist() == [0, 96, 120]
    assert shapes2.tolist() == [[4, 6]] and start2.tolist() == [0]
    assert ref.shape == (1, 24, 1, 2) and ref2.shape == (1, 126, 1, 2)
    # query 7 of the 4x6 grid is row 1, column 1: centre x = 1.5 / 6, y = 1.5 / 4
    assert torch.allclose(ref[0, 7, 0], torch.tensor([1.5 / 6, 1.5 / 4]))
    assert prior_shapes((4, 6)) == [(8, 12), (4, 6), (2, 3)]


def naive_deform_attn(attn, query, value, ref, shapes):
    """Deformable attention written out (Zhu et al. 2021, eq. 2; the official MSDeformAttn.forward,
    detection/ops/modules/ms_deform_attn.py:84-136) over mmcv's sampling function."""
    b, nq, _ = query.shape
    heads, levels, points = attn.num_heads, attn.num_levels, attn.num_points
    v = attn.value_proj(value).view(b, value.shape[1], heads, -1)
    off = attn.sampling_offsets(query).view(b, nq, heads, levels, points, 2)
    w = attn.attention_weights(query).view(b, nq, heads, levels * points).softmax(-1)
    w = w.view(b, nq, heads, levels, points)
    normalizer = torch.stack([shapes[:, 1], shapes[:, 0]], -1)
    loc = ref[:, :, None, :, None, :] + off / normalizer[None, None, None, :, None, :]
    return attn.output_proj(multi_scale_deformable_attn_pytorch(v, shapes, loc, w))


def test_injector_and_extractor_are_the_official_residuals_over_deformable_attention():
    torch.manual_seed(0)
    grid = (4, 6)
    (ref, shapes, start), (ref2, shapes2, start2) = deform_inputs(grid, torch.device('cpu'))
    x, c = torch.randn(2, 24, 96), torch.randn(2, 126, 96)
    inj = Injector(96, 3, 4, deform_ratio=0.5, init_values=0.3)
    ext = Extractor(96, 3, 4, deform_ratio=0.5, with_cffn=False, cffn_ratio=0.25)
    randomize_(inj)
    randomize_(ext)
    with torch.no_grad():
        want_x = x + inj.gamma * naive_deform_attn(inj.attn, inj.query_norm(x), inj.feat_norm(c), ref, shapes)
        want_c = c + naive_deform_attn(ext.attn, ext.query_norm(c), ext.feat_norm(x), ref2, shapes2)
        torch.testing.assert_close(inj(x, c, ref, shapes, start), want_x, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ext(c, x, ref2, shapes2, start2, grid), want_c, atol=1e-5, rtol=1e-5)


def test_a_zero_offset_extractor_reads_its_own_position_on_a_non_square_grid():
    """Zero offsets and one point: each stride-16 prior token samples the ViT token at its own pixel centre, so the
    attention is value_proj -> output_proj of that token (row/column order, x/y order)."""
    torch.manual_seed(0)
    grid = (4, 6)
    _, (ref, shapes, start) = deform_inputs(grid, torch.device('cpu'))
    ext = Extractor(96, 3, 1, deform_ratio=1.0, with_cffn=False, cffn_ratio=0.25)
    with torch.no_grad():
        ext.attn.sampling_offsets.bias.zero_()
        ext.attn.sampling_offsets.weight.zero_()
    x, c = torch.randn(1, 24, 96), torch.randn(1, 126, 96)
    with torch.no_grad():
        out = ext(c, x, ref, shapes, start, grid)[:, 96:120] - c[:, 96:120]
        want = ext.attn.output_proj(ext.attn.value_proj(ext.feat_norm(x)))
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA (mmcv CUDA kernel vs its PyTorch path)')
def test_cuda_kernel_matches_the_pytorch_path():
    grid = (4, 6)
    (ref, shapes, start), _ = deform_inputs(grid, torch.device('cuda'))
    inj = Injector(96, 3, 4, deform_ratio=0.5, init_values=0.3).cuda()
    randomize_(inj)
    x, c = torch.randn(2, 24, 96, device='cuda'), torch.randn(2, 126, 96, device='cuda')
    with torch.no_grad():
        want = x + inj.gamma * naive_deform_attn(inj.attn, inj.query_norm(x), inj.feat_norm(c), ref, shapes)
        torch.testing.assert_close(inj(x, c, ref, shapes, start), want, atol=1e-4, rtol=1e-4)


def test_official_file_keeps_its_heads_on_request():
    """The backbone's strict load and round trip: test_contract.py; here the whole segmentor's file."""
    src = tiny()
    whole = convert_vit_adapter(official_layout(src), keep_heads=True)
    assert 'decode_head.conv_seg.weight' in whole and 'backbone.level_embed' in whole
    assert not any(k.endswith('relative_position_index') for k in whole)


def test_converter_names_foreign_keys():
    sd = official_layout(tiny())
    sd['backbone.interactions.0.injector.attn.value_proj.weightx'] = torch.zeros(1)
    with pytest.raises(ValueError, match='1 keys are not official ViT-Adapter'):
        convert_vit_adapter(sd)
    sd = official_layout(tiny())
    sd['decode_head.pixel_decoder.input_convs.0.conv.weight'] = torch.zeros(1)
    sd['query_embed.weight'] = torch.zeros(1)
    with pytest.raises(ValueError, match='Mask2Former head.*without --keep-head'):
        convert_vit_adapter(sd, keep_heads=True)


def test_a_plain_beit_checkpoint_loads_with_the_adapter_kept_at_init(tmp_path):
    beit = BEiT(arch=TINY['arch'], img_size=64, layer_scale_init_value=1e-6)  # square, as released files
    randomize_(beit)
    path = tmp_path / 'beit.pth'
    torch.save(beit.state_dict(), path)
    model = BEiTAdapter(**TINY, init_cfg=dict(type='Pretrained', checkpoint=str(path), keep_init=ADAPTER_WEIGHTS))
    model.init_weights()
    torch.testing.assert_close(model.blocks[2].attn.qkv.weight, beit.blocks[2].attn.qkv.weight)
    assert math.isclose(model.interactions[0].injector.attn.attention_weights.weight.abs().sum().item(), 0.0)
    with pytest.raises(RuntimeError, match='ADAPTER_WEIGHTS'):
        BEiTAdapter(**TINY, init_cfg=dict(type='Pretrained', checkpoint=str(path))).init_weights()
