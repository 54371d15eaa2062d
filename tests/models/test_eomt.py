"""EoMT on BEiT and the query tokens in BEiT's attention, against github.com/tue-mps/eomt at
7bd19ddd621c5c6adedcd260458a34783cd4a45f (rules cited per test) and the plain BEiT block."""
import math

import pytest
import torch
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample

from beit_mm.models.layers import BEiTBlock
from beit_mm.models.layers.rel_pos_bias import NUM_CLS_ROWS
from beit_mm.models.segmentors import mask_probabilities
from beit_mm.registry import MODELS

from ..conftest import assert_close_to_scale, randomize_

GRID = (3, 4)
DIMS, HEADS = 32, 4


def random_block(impl: str = 'eager') -> BEiTBlock:
    torch.manual_seed(0)
    blk = BEiTBlock(DIMS, HEADS, 2.0, grid=GRID, layer_scale_init_value=0.5, attn_impl=impl).eval()
    randomize_(blk)
    return blk


@pytest.mark.parametrize('impl', ['eager', 'sdpa'])
@torch.no_grad()
def test_queries_take_the_cls_rows_of_the_relative_position_bias(impl):
    """K query copies of the cls token: each query's output equals the cls token's, and the block equals the plain
    block whose token->cls bias entry is raised by log(K + 1)."""
    k = 3
    blk = random_block(impl)
    x = torch.randn(2, 1 + GRID[0] * GRID[1], DIMS)
    with_queries = blk(torch.cat([x[:, :1].expand(-1, k, -1), x], dim=1), GRID, num_queries=k)
    for q in range(k):
        assert_close_to_scale(with_queries[:, q], with_queries[:, k], what=f'query {q} vs cls')
    plain = random_block(impl)
    # table rows: ..., cls->token, token->cls, cls->cls (rel_pos_bias.py NUM_CLS_ROWS)
    plain.attn.relative_position_bias_table[-NUM_CLS_ROWS + 1] += math.log(k + 1)
    want = plain(x, GRID)
    assert_close_to_scale(with_queries[:, k + 1:], want[:, 1:], what='patches')
    # the cls token attends to itself and K copies with the cls->cls entry: raise it by log(K + 1) as well
    plain.attn.relative_position_bias_table[-1] += math.log(k + 1)
    assert_close_to_scale(with_queries[:, k], plain(x, GRID)[:, 0], what='cls')


@pytest.mark.parametrize('impl', ['eager', 'sdpa'])
def test_attention_mask_cuts_the_masked_patches(impl):
    """A query that may not attend to a patch (mask False) gets no gradient from it, and it does from the others
    (official ``models/eomt.py:108,112``: True = may attend)."""
    k, n = 2, GRID[0] * GRID[1]
    blk = random_block(impl)
    x = torch.randn(1, k + 1 + n, DIMS, requires_grad=True)
    attn_mask = torch.ones(1, k + 1 + n, k + 1 + n, dtype=torch.bool)
    attn_mask[0, 0, k + 1 + 5] = False
    out = blk(x, GRID, num_queries=k, attn_mask=attn_mask)
    grad, = torch.autograd.grad(out[0, 0].sum(), x)
    assert float(grad[0, k + 1 + 5].abs().max()) == 0.0
    assert float(grad[0, k + 1 + 4].abs().max()) > 0.0
    assert float(grad[0, k + 1].abs().max()) > 0.0  # the cls token stays visible


@torch.no_grad()
def test_attention_mask_eager_and_sdpa_equal():
    k, n = 2, GRID[0] * GRID[1]
    x = torch.randn(2, k + 1 + n, DIMS)
    attn_mask = torch.rand(2, k + 1 + n, k + 1 + n) > 0.3
    attn_mask[:, :, k] = True  # every row sees the cls token
    outs = [random_block(impl)(x, GRID, num_queries=k, attn_mask=attn_mask) for impl in ('eager', 'sdpa')]
    assert_close_to_scale(outs[1], outs[0], what='sdpa vs eager')


def tiny_eomt(**overrides):
    cfg = dict(type='EoMT', num_classes=5, num_queries=6, num_blocks=2,
               backbone=dict(type='BEiT', arch=dict(embed_dims=DIMS, num_layers=4, num_heads=HEADS, mlp_ratio=2.0),
                             img_size=32, final_norm=True, drop_path_rate=0.0),
               mask_annealing=dict(start_steps=[2, 4], end_steps=[4, 6]),
               loss=dict(type='MaskClassificationLoss', num_classes=5, num_points=64))
    cfg.update(overrides)
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    model.init_weights()
    randomize_(model.backbone)
    return model


def samples(batch: int = 2, size: int = 32):
    out = []
    for _ in range(batch):
        s = SegDataSample()
        s.gt_sem_seg = PixelData(data=torch.randint(0, 5, (1, size, size)))
        s.set_metainfo(dict(ori_shape=(size, size), img_shape=(size, size), pad_shape=(size, size)))
        out.append(s)
    return out


def test_predictions_per_block_and_shapes():
    """L2 + 1 predictions with masked attention (the inputs of the last L2 blocks and the output), one without
    (``models/eomt.py:171-199``); masks at 4x the patch grid for patch 16 (``eomt.py:47-53``: log2(16) - 2 = 2
    ScaleBlocks); the loss keys of the intermediate ones end in _block_-2, _block_-1
    (``training/lightning_module.py:386-393``)."""
    model = tiny_eomt()
    masks, classes = model.forward_predictions(torch.randn(2, 3, 32, 32))
    assert len(masks) == len(classes) == 3
    assert masks[0].shape == (2, 6, 8, 8) and classes[0].shape == (2, 6, 6)
    assert len(model.upscale) == 2
    masks, _ = tiny_eomt(masked_attn=False).forward_predictions(torch.randn(2, 3, 32, 32))
    assert len(masks) == 1
    model.set_annealing_step(0)
    losses = model.loss(torch.randn(2, 3, 32, 32), samples())
    assert set(losses) == {f'loss_{n}{s}' for n in ('cls', 'mask', 'dice') for s in ('_block_-2', '_block_-1', '')}


@torch.no_grad()
def test_queries_join_before_the_last_blocks():
    """The queries are prepended to the input of block ``depth - L2`` (``models/eomt.py:166-169``): blocks 0-1 of 4
    see 1 + 2 x 2 tokens (32 px, patch 16), blocks 2-3 K + 1 + 4, and the first 2 blocks compute what the plain backbone computes."""
    model = tiny_eomt()
    model.set_annealing_step(0)
    seen = []
    hooks = [blk.register_forward_hook(lambda m, args, out: seen.append(out)) for blk in model.backbone.blocks]
    x = torch.randn(2, 3, 32, 32)
    model.forward_predictions(x)
    assert [t.shape[1] for t in seen] == [5, 5, 11, 11]
    for h in hooks:
        h.remove()
    plain = model.backbone.forward_tokens(x, out_indices=(1, ))[0][0]
    assert torch.equal(seen[1], plain)


@torch.no_grad()
def test_each_masked_block_uses_its_own_probability_and_the_final_norm():
    """Block ``i`` of the last ``L2`` uses ``attn_mask_probs[i - depth + L2]`` (``models/eomt.py:142-147``): with
    probabilities [0, 1] the first masked block's queries see every patch and the second's only their predicted
    masks. Every prediction reads ``backbone.norm`` of the tokens (``eomt.py:175,197``)."""
    model = tiny_eomt()
    model.attn_mask_probs.copy_(torch.tensor([0.0, 1.0]))
    masks_seen, normed = [], []
    blocks = model.backbone.blocks
    hooks = [blk.register_forward_pre_hook(lambda m, args, kwargs: masks_seen.append(kwargs['attn_mask']),
                                           with_kwargs=True) for blk in blocks[2:]]
    hooks.append(model.backbone.norm.register_forward_hook(lambda m, args, out: normed.append(out)))
    masks, classes = model.forward_predictions(torch.randn(2, 3, 32, 32))
    for h in hooks:
        h.remove()
    k = model.num_queries
    assert bool(masks_seen[0][:, :k, k + 1:].all())
    assert not bool(masks_seen[1][:, :k, k + 1:].all())
    assert len(normed) == 3
    assert torch.equal(classes[-1], model.class_head(normed[-1][:, :k]))


@torch.no_grad()
def test_annealed_masks_equal_no_masking():
    """Once every probability is 0 (after the last end step) every query's mask is dropped, so the output equals the
    model without masked attention (``eomt.py:71-82``): the queries join before the same block either way."""
    model = tiny_eomt()
    model.set_annealing_step(6)
    assert model.attn_mask_probs.tolist() == [0.0, 0.0]
    x = torch.randn(2, 3, 32, 32)
    masks, classes = model.forward_predictions(x)
    model.masked_attn = False
    masks_off, classes_off = model.forward_predictions(x)
    assert torch.equal(masks[-1], masks_off[-1]) and torch.equal(classes[-1], classes_off[-1])
    model.masked_attn = True
    model.set_annealing_step(0)  # all masks kept: the output changes
    assert not torch.allclose(model.forward_predictions(x)[0][-1], masks_off[-1])


@torch.no_grad()
def test_inference_skips_the_masks_of_annealed_blocks():
    """In eval mode a block at probability 0 makes no prediction and runs unmasked: the output equals the
    training-mode forward, which computes that block's mask and drops it for every query as the official code does
    (``eomt.py:71-82``); a block at probability 1 still predicts and masks."""
    model = tiny_eomt()
    model.set_annealing_step(6)
    x = torch.randn(2, 3, 32, 32)
    masks_train, classes_train = model.forward_predictions(x)
    masks_eval, classes_eval = model.eval().forward_predictions(x)
    assert len(masks_train) == 3 and len(masks_eval) == 1
    assert torch.equal(masks_eval[-1], masks_train[-1]) and torch.equal(classes_eval[-1], classes_train[-1])
    model.attn_mask_probs.copy_(torch.tensor([0.0, 1.0]))
    masks_eval, _ = model.forward_predictions(x)
    masks_train, _ = model.train().forward_predictions(x)
    assert len(masks_eval) == 2 and torch.equal(masks_eval[-1], masks_train[-1])


def test_annealing_probabilities_follow_the_official_rule():
    model = tiny_eomt()
    for step in range(8):
        model.set_annealing_step(step)
        assert model.attn_mask_probs.tolist() == mask_probabilities(step, [2, 4], [4, 6], 0.9)


@torch.no_grad()
def test_semantic_inference_is_the_sum_over_queries():
    """``mask_classification_semantic.py:99-103``: masks resized to the input, then sum_q sigmoid(mask) x
    softmax(class)[:C] (``lightning_module.py:668-675``); a query sure of class 3 with a mask covering the left half
    makes the left half class 3."""
    model = tiny_eomt().eval()
    model.set_annealing_step(6)
    model.class_head.weight.zero_()
    model.class_head.bias.copy_(torch.tensor([0.0, 0, 0, 20, 0, 0]))  # every query: class 3
    logits = model.encode_decode(torch.randn(1, 3, 32, 32), [dict()])
    assert logits.shape == (1, 5, 32, 32)
    assert bool((logits.argmax(1) == 3).all())
    masks, classes = model.forward_predictions(torch.randn(1, 3, 32, 32))
    assert float(classes[-1].softmax(-1)[..., 3].min()) > 0.99


def test_refusals():
    with pytest.raises(ValueError, match='final_norm=True'):
        tiny_eomt(backbone=dict(type='BEiT', arch='tiny', img_size=32, drop_path_rate=0.0))
    with pytest.raises(ValueError, match='drop_path_rate=0.0'):
        tiny_eomt(backbone=dict(type='BEiT', arch='tiny', img_size=32, final_norm=True, drop_path_rate=0.1))
    with pytest.raises(ValueError, match='one entry per masked block'):
        tiny_eomt(mask_annealing=dict(start_steps=[1], end_steps=[2]))
    model = tiny_eomt()
    with pytest.raises(RuntimeError, match='EoMTMaskAnnealingHook'):
        model.loss(torch.randn(2, 3, 32, 32), samples())
