"""beit_mm.visualization: attention recorded by hooks (vs HF transformers' BEiT attentions, and vs the modules' own
outputs), attention rollout (vs a float64 loop of Abnar & Zuidema's definition), the MIM pictures (vs the training
loss path), and the figures/tools writing small PNGs."""
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

from beit_mm.converters.beit import convert_beit
from beit_mm.models.backbones import CvT
from beit_mm.visualization import (attention_rollout, mim_pictures, masked_token_logits, query_attention,
                                   record_attention, spread_matrix, square_cvt_attention)
from beit_mm.apis import build_from_config

from ..conftest import ROOT, randomize_
from ..models.test_beit import hf_beit, ours_like

TOL = 1e-5  # recomputed vs actual outputs (same ops)
HF_TOL = 1e-4  # vs HF transformers (test_beit.py parity tolerance)


def _module_outputs(model, types):
    """Forward hooks collecting each attention module's real output, in forward order."""
    outs, handles = [], []
    for m in model.modules():
        if isinstance(m, types):
            handles.append(m.register_forward_hook(lambda mod, args, out: outs.append(out.detach())))
    return outs, handles


def _mix(amap, attn_module):
    """proj(probs @ v) with heads merged: what the attention module outputs if ``probs`` are its probabilities."""
    b, _, n, _ = amap.probs.shape
    return attn_module.proj((amap.probs @ amap.values).transpose(1, 2).reshape(b, n, -1))


@pytest.mark.parametrize('variant', [dict(rel=True, shared=False), dict(rel=False, shared=True)])
def test_beit_attention_equals_hf_attentions(variant):
    """Per-block bias and the shared (pretraining) bias: the recorded probabilities equal HF BeitModel's
    ``output_attentions`` (eager softmax) with the same weights; a 6x6 grid (48 px, 8 px patches)."""
    hf = hf_beit(**variant)
    ours = ours_like(hf, final_norm=True)
    ours.load_state_dict(convert_beit(hf.state_dict(), 'hf', expand_shared_bias=False), strict=True)
    x = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(x, output_attentions=True).attentions
    maps = record_attention(ours, x)
    assert len(maps) == len(ref) == 3
    for amap, r in zip(maps, ref):
        assert amap.probs.shape == r.shape == (2, 2, 37, 37)
        assert (amap.probs - r).abs().max() < HF_TOL, amap.name


@pytest.mark.parametrize('fused', [True, False])
def test_beit_probs_reproduce_module_output(fused):
    """proj(probs @ v) equals each BEiTAttention's output (SDPA and eager), at a grid other than the training one
    (the bias tables are resampled on the fly)."""
    from beit_mm.models.backbones import BEiT
    from beit_mm.models.layers import BEiTAttention
    model = randomize_(BEiT(arch=dict(embed_dims=24, num_layers=2, num_heads=3, mlp_ratio=2.0), img_size=32,
                            patch_size=8, use_shared_rel_pos_bias=True,
                            attn_impl='sdpa' if fused else 'eager')).eval()
    outs, handles = _module_outputs(model, BEiTAttention)
    maps = record_attention(model, torch.randn(1, 3, 48, 40))
    for h in handles:
        h.remove()
    attn_modules = [m for m in model.modules() if isinstance(m, BEiTAttention)]
    for amap, out, module in zip(maps, outs, attn_modules):
        assert amap.query_grid == (6, 5) and amap.probs.shape == (1, 3, 31, 31)
        assert torch.allclose(amap.probs.sum(-1), torch.ones(1, 3, 31))
        assert (_mix(amap, module) - out).abs().max() < TOL, amap.name


@pytest.mark.parametrize('impl', ['sdpa', 'eager'])
def test_cvt_probs_reproduce_module_output(impl):
    """CvT: strided keys (stride-2 projections), the last stage's cls token, BatchNorm in eval mode."""
    from beit_mm.models.layers.conv_attention import ConvProjectionAttention
    model = randomize_(CvT(arch=dict(embed_dims=[16, 24, 32], depths=[1, 1, 2], num_heads=[1, 2, 2]),
                           attn_impl=impl)).eval()
    outs, handles = _module_outputs(model, ConvProjectionAttention)
    maps = record_attention(model, torch.randn(2, 3, 64, 64))
    for h in handles:
        h.remove()
    attn_modules = [m for m in model.modules() if isinstance(m, ConvProjectionAttention)]
    assert [m.query_grid for m in maps] == [(16, 16), (8, 8), (4, 4), (4, 4)]
    assert [m.key_grid for m in maps] == [(8, 8), (4, 4), (2, 2), (2, 2)]
    assert [m.num_cls for m in maps] == [0, 0, 1, 1]
    assert maps[-1].probs.shape == (2, 2, 17, 5)
    for amap, out, module in zip(maps, outs, attn_modules):
        assert (_mix(amap, module) - out).abs().max() < TOL, amap.name
    heads = query_attention(maps[-1], (1, 2))
    assert heads.shape == (2, 2, 2)
    assert torch.equal(heads.flatten(1), maps[-1].probs[0, :, 1 + 1 * 4 + 2, 1:])


def _rollout_reference(probs_list):
    """Abnar & Zuidema 2020, eq. for rollout with the residual: float64 numpy, one explicit loop per row."""
    result = None
    for p in probs_list:
        a = p.double().numpy().mean(axis=1)  # (B, N, N)
        n = a.shape[-1]
        a_res = np.empty_like(a)
        for b in range(a.shape[0]):
            for i in range(n):
                row = 0.5 * a[b, i] + 0.5 * np.eye(n)[i]
                a_res[b, i] = row / row.sum()
        result = a_res if result is None else np.einsum('bij,bjk->bik', a_res, result)
    return result


def test_rollout_matches_reference_loop():
    g = torch.Generator().manual_seed(0)
    probs = [torch.randn(2, 3, 10, 10, generator=g).softmax(-1) for _ in range(4)]
    ours = attention_rollout(probs)
    assert np.abs(ours.double().numpy() - _rollout_reference(probs)).max() < 1e-6
    assert torch.allclose(ours.sum(-1), torch.ones(2, 10))
    # one block attending only to itself everywhere: rollout is the identity
    assert torch.allclose(attention_rollout([torch.eye(5).expand(1, 2, 5, 5)]), torch.eye(5).expand(1, 5, 5))


def test_spread_matrix_for_strided_keys():
    """4x4 queries, 2x2 strided keys, one cls token: key (i, j) covers the 2x2 query cell (2i..2i+1, 2j..2j+1)."""
    s = spread_matrix((4, 4), (2, 2), 1)
    assert s.shape == (5, 17)
    assert torch.allclose(s.sum(1), torch.ones(5))
    assert s[0, 0] == 1 and s[0, 1:].abs().sum() == 0
    key_11 = s[1 + 3].view(-1)[1:].view(4, 4)  # key (1, 1)
    expected = torch.zeros(4, 4)
    expected[2:, 2:] = 0.25
    assert torch.equal(key_11, expected)
    # odd grids (5x5 queries, 3x3 keys): cells are cut at the border, rows still sum to 1
    assert torch.allclose(spread_matrix((5, 5), (3, 3), 0).sum(1), torch.ones(9))


def test_square_cvt_attention_keeps_rows_stochastic():
    model = randomize_(CvT(arch=dict(embed_dims=[16, 24, 32], depths=[1, 1, 2], num_heads=[1, 2, 2]))).eval()
    maps = record_attention(model, torch.randn(1, 3, 64, 64))
    sq = square_cvt_attention(maps[-1])
    assert sq.shape == (1, 2, 17, 17)
    assert torch.allclose(sq.sum(-1), torch.ones(1, 2, 17), atol=1e-6)


def _tiny_mim_and_dvae():
    mim_cfg = Config.fromfile(osp.join(ROOT, 'configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'))
    dvae_cfg = Config.fromfile(osp.join(ROOT, 'configs/demo/dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py'))
    torch.manual_seed(0)
    mim, dvae = build_from_config(mim_cfg), build_from_config(dvae_cfg)
    # the MIM tokenizer is the dVAE's encoder (what tools/run_chain.sh exports)
    mim.target_generator.load_state_dict(dvae.encoder.state_dict())
    return mim, dvae


def test_mim_pictures_agree_with_the_training_loss():
    """masked_token_logits at the masked patches give exactly BEiTPretrain.loss's cross-entropy and mim_acc; the
    tokenizer reconstruction is the dVAE decoding of the target ids."""
    mim, dvae = _tiny_mim_and_dvae()
    g = torch.Generator().manual_seed(0)
    images = torch.randn(2, 3, 96, 96, generator=g)
    target_images = torch.rand(2, 3, 48, 48, generator=g) * 255
    mask = torch.zeros(2, 6, 6, dtype=torch.bool)
    mask[:, 1:4, 2:5] = True
    mask[1, 5, :] = True
    with torch.no_grad():
        ref = mim.loss(dict(images=images, target_images=target_images, mask=mask))
        logits = masked_token_logits(mim, images, mask)
        target = mim.target_generator.get_targets(dict(target_images=target_images))
    flat = mask.flatten(1)
    assert logits.shape == (2, 36, 512)
    assert torch.allclose(F.cross_entropy(logits[flat], target[flat]), ref['loss'], atol=1e-6)
    pics = mim_pictures(mim, dvae, images, target_images, mask)
    assert abs(pics.accuracy - ref['mim_acc'].item()) < 1e-6
    assert torch.equal(pics.target_ids, target)
    assert torch.equal(pics.predicted_ids[~flat], target[~flat])
    assert torch.equal(pics.predicted_ids[flat], logits.argmax(-1)[flat])
    ids = target.view(2, 6, 6)
    onehot = F.one_hot(ids, 512).permute(0, 3, 1, 2).float()
    with torch.no_grad():
        assert torch.allclose(pics.reconstruction, dvae.decode(onehot))
    assert pics.prediction.shape == (2, 3, 48, 48) and 0 <= pics.prediction.min() and pics.prediction.max() <= 1


def test_figures_are_small_pngs(tmp_path):
    from PIL import Image

    from beit_mm.visualization.figures import attention_figure, mim_figure, save_png, token_map_figure
    mim, dvae = _tiny_mim_and_dvae()
    yy, xx = np.mgrid[0:96, 0:96]  # a smooth picture: the size bound checks the figure settings, not noise entropy
    image = np.stack([xx * 2.5, yy * 2.5, (xx + yy) * 1.3], -1).astype(np.uint8)
    maps = record_attention(mim.backbone, torch.randn(1, 3, 96, 96))
    paths = [save_png(attention_figure(image, maps, 1, (2, 3)), str(tmp_path / 'att.png'))]
    ids = torch.randint(0, 512, (36, ))
    paths.append(save_png(token_map_figure(image[:48, :48], ids, (6, 6), 512), str(tmp_path / 'tok.png')))
    mask = torch.zeros(1, 6, 6, dtype=torch.bool)
    mask[0, :3, :3] = True
    pics = mim_pictures(mim, dvae, torch.randn(1, 3, 96, 96), torch.rand(1, 3, 48, 48) * 0.8 + 0.1, mask)
    paths.append(save_png(mim_figure(image, image[:48, :48], pics), str(tmp_path / 'mim.png')))
    for p in paths:
        assert osp.getsize(p) < 200_000, p
        with Image.open(p) as im:
            assert im.mode == 'RGB' and min(im.size) > 100
