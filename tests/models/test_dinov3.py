"""beit_mm's DINOv3 parts on their own: RoPE coordinates and periods (facebookresearch/dinov3 @ 6876159
``dinov3/layers/rope_position_encoding.py``), its training-only augmentations, the attention kernels under EoMT's
mask, the layer scale's init and the converters' refusals."""
import math

import pytest
import torch

from beit_mm.converters.dinov3 import hf_dinov3_to_beit_mm, official_dinov3_to_beit_mm
from beit_mm.models.layers.dinov3_block import DINOv3Attention
from beit_mm.models.layers.rope import RopePositionEmbedding, apply_rope
from beit_mm.registry import MODELS

TINY = dict(embed_dims=64, num_layers=3, num_heads=4, mlp_ratio=4.0)


def test_rope_coordinates_and_periods():
    """Patch (i, j) of an h x w grid at (2 (i + 0.5) / h - 1, 2 (j + 0.5) / w - 1); periods base ** (4k / D);
    angles [y-blocks, x-blocks] twice."""
    rope = RopePositionEmbedding(16).eval()  # D = 16: 4 periods
    assert torch.allclose(rope.periods, torch.tensor([100 ** (4 * k / 16) for k in range(4)]))
    coords = rope.coords((3, 5))
    assert coords.shape == (15, 2)
    assert torch.allclose(coords[7], torch.tensor([2 * 1.5 / 3 - 1, 2 * 2.5 / 5 - 1]))  # patch (1, 2): the centre
    assert torch.allclose(coords[0], torch.tensor([2 * 0.5 / 3 - 1, 2 * 0.5 / 5 - 1]))
    sin, cos = rope((3, 5))
    y, x = coords[4]  # patch (0, 4)
    angles = [2 * math.pi * y / p for p in rope.periods] + [2 * math.pi * x / p for p in rope.periods]
    assert torch.allclose(sin[4], torch.tensor(angles * 2).sin(), atol=1e-6)
    assert torch.allclose(cos[4], torch.tensor(angles * 2).cos(), atol=1e-6)
    periods = RopePositionEmbedding(16, base=None, min_period=0.5, max_period=8.0).periods
    assert torch.allclose(periods, 0.5 * 16 ** (torch.arange(4) / 3))  # log-spaced from 0.5 to 8
    with pytest.raises(ValueError, match='either base or both'):
        RopePositionEmbedding(16, base=None)
    with pytest.raises(ValueError, match='divisible by 4'):
        RopePositionEmbedding(18)


def test_rope_augmentations_are_drawn_in_training_only():
    rope = RopePositionEmbedding(16, rescale_coords=2.0)
    plain = rope.eval().coords((4, 6))
    assert torch.equal(plain, rope.coords((4, 6)))  # eval: no augmentation
    rope.train()
    torch.manual_seed(0)
    a, b = rope.coords((4, 6)), rope.coords((4, 6))
    assert not torch.equal(a, b)  # a new draw at every call
    for scaled in (a, b):  # rescale: one factor for both axes, in [1/2, 2]
        factor = scaled / plain
        assert torch.allclose(factor, factor[0, 0].expand_as(factor)) and 0.5 <= factor[0, 0] <= 2.0
    jitter = RopePositionEmbedding(16, base=100, jitter_coords=3.0).train().coords((4, 6)) / plain
    assert not torch.isclose(jitter[0, 0], jitter[0, 1])  # jitter: one factor per axis
    shift = RopePositionEmbedding(16, shift_coords=0.1).train().coords((4, 6)) - plain
    assert torch.allclose(shift, shift[:1].expand_as(shift)) and shift.abs().max() <= 0.1


def test_apply_rope_rotates_the_patches_only():
    q, k = torch.randn(2, 4, 3 + 12, 16), torch.randn(2, 4, 3 + 12, 16)
    rope = RopePositionEmbedding(16).eval()((3, 4))
    q2, k2 = apply_rope(q, k, rope)
    assert torch.equal(q2[:, :, :3], q[:, :, :3]) and torch.equal(k2[:, :, :3], k[:, :, :3])
    assert not torch.allclose(q2[:, :, 3:], q[:, :, 3:])
    assert torch.allclose(q2.norm(dim=-1), q.norm(dim=-1), atol=1e-5)  # a rotation
    # relative: the score of two patches depends on their offset only (same q/k content at every position)
    qv, kv = torch.randn(16), torch.randn(16)
    qs, ks = apply_rope(qv.expand(1, 1, 12, 16), kv.expand(1, 1, 12, 16), rope)
    scores = qs[0, 0] @ ks[0, 0].T  # (12, 12), grid 3 x 4 row-major
    assert torch.allclose(scores[0, 5], scores[6, 11], atol=1e-5)  # (0,0)->(1,1) and (1,2)->(2,3)


def test_sdpa_and_eager_attention_agree():
    torch.manual_seed(0)
    attn = DINOv3Attention(64, 4)
    with torch.no_grad():
        attn.q_bias.normal_(), attn.v_bias.normal_()
    x = torch.randn(2, 3 + 5 + 12, 64)
    rope = RopePositionEmbedding(16).eval()((3, 4))
    mask = torch.rand(2, 20, 20) > 0.3
    mask[:, :, 3] = True  # every row attends to something
    outs = {}
    for impl in ('sdpa', 'eager'):
        attn.attn_impl = impl
        outs[impl] = attn(x, rope, mask)
    assert (outs['sdpa'] - outs['eager']).abs().max() <= 1e-5


def test_layer_scale_init_and_size_refusal():
    model = MODELS.build(dict(type='beit_mm.DINOv3', arch=TINY, img_size=64)).eval()
    model.init_weights()
    assert all(torch.equal(blk.gamma_1, torch.full((64, ), 1e-5)) for blk in model.blocks)
    with pytest.raises(ValueError, match='not divisible by the patch size'):
        model(torch.randn(1, 3, 50, 64))


def test_converters_refuse_what_dinov3_cannot_hold():
    model = MODELS.build(dict(type='beit_mm.DINOv3', arch=TINY))
    periods = RopePositionEmbedding(16).periods
    official = {'rope_embed.periods': periods, 'cls_token': torch.zeros(1, 1, 64),
                'patch_embed.proj.weight': torch.zeros(64, 3, 16, 16), 'patch_embed.proj.bias': torch.zeros(64),
                'blocks.0.attn.qkv.weight': torch.zeros(192, 64), 'blocks.0.attn.qkv.bias': torch.ones(192)}
    with pytest.raises(ValueError, match='block 0 has a key bias'):  # no bias_mask: the key third counts
        official_dinov3_to_beit_mm(official)
    masked = dict(official, **{'blocks.0.attn.qkv.bias_mask': torch.cat([torch.ones(64), torch.zeros(64),
                                                                          torch.ones(64)])})
    out = official_dinov3_to_beit_mm(masked)
    assert torch.equal(out['blocks.0.attn.q_bias'], torch.ones(64)) and 'reg_token' not in out
    with pytest.raises(ValueError, match='neither base'):
        official_dinov3_to_beit_mm(dict(masked, **{'rope_embed.periods': periods * torch.tensor([1.0, 1.0, 3.0, 1.0])}))
    with pytest.raises(ValueError, match='have no beit_mm counterpart'):
        official_dinov3_to_beit_mm(dict(masked, **{'head.weight': torch.zeros(1)}))
    with pytest.raises(ValueError, match='not a transformers DINOv3ViTModel'):
        hf_dinov3_to_beit_mm(model.state_dict())


def test_backbone_and_its_eomt_compile_whole():
    """DINOv3 and EoMT on it compile whole (``fullgraph=True``) with outputs and gradients equal to eager (the
    contract of test_compile_models.py); the RoPE rescale is off, its draws being random."""
    import torch._dynamo
    from . import test_eomt
    from .test_compile_models import check_compiles_whole
    from ..conftest import randomize_
    torch._dynamo.reset()
    try:
        backbone = dict(type='beit_mm.DINOv3', arch=dict(TINY, embed_dims=32, num_layers=2), img_size=32,
                        patch_size=8, rope_rescale_coords=None, out_indices=(0, 1))
        model = randomize_(MODELS.build(backbone)).train()
        xs = [torch.randn(2, 3, 32, 32) for _ in range(2)]
        check_compiles_whole(model, [lambda m, x=x: m(x) for x in xs])
        torch._dynamo.reset()
        eomt = test_eomt.tiny_eomt(backbone=dict(backbone, arch=dict(TINY, embed_dims=32, num_layers=4),
                                                 out_indices=(-1, ))).train()
        eomt.set_annealing_step(3)
        check_compiles_whole(eomt, [lambda m, x=x, s=test_eomt.samples(): m.loss(x, s) for x in xs])
    finally:
        torch._dynamo.reset()
