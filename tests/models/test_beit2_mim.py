"""BEiT v2 masked image modeling: ``BEiT(cls_pretrain=...)`` + the shared ``BEiTMIMHead`` inside ``BEiTPretrain``.

- forward: mmpretrain 1.2.0's ``BEiTPretrainViT`` + ``BEiTV2Neck`` (unilm ``beit2/modeling_pretrain.py`` lines
  307-333), fp32 <= 1e-5; init: unilm lines 280-289 and ``fix_init_cls_pt_weight`` (lines 299-305);
- loss: unilm ``beit2/engine_for_pretraining.py`` lines 54-66 and mmpretrain 1.2.0's BEiT v2 with the same weights,
  fp32 <= 1e-4; the tokenizer view is handed on unchanged (0..255 RGB)."""
import math

import pytest
import torch
import torch.nn.functional as F

from beit_mm.converters.beit import convert_beit
from beit_mm.models.backbones import BEiT
from beit_mm.models.selfsup import BEiTPretrain, MIMDataPreprocessor

from ..conftest import randomize_

DIM, DEPTH, HEADS, VOCAB, EARLY = 32, 4, 2, 16, 3
ARCH = dict(embed_dims=DIM, num_layers=DEPTH, num_heads=HEADS, mlp_ratio=2.0)


def v2_backbone(drop_path_rate=0.0, **kw) -> BEiT:
    """A 4-block BEiT on 32x32 images with 8x8 patches (4x4 grid), BEiT v2 pretraining layout, early_layers 3."""
    return BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=False, use_shared_rel_pos_bias=True,
                with_mask_token=True, final_norm=True, layer_scale_init_value=0.1, drop_path_rate=drop_path_rate,
                cls_pretrain=dict(early_layers=EARLY, head_layers=2), init_mode='pretrain', **kw)


def v2_cfg() -> dict:
    """BEiTPretrain around v2_backbone; targets of these tests are given directly (``head.loss``), so any vocabulary
    tokenizer fits: DALL-E's encoder at the 4x4 token grid stands in."""
    bb = dict(type='beit_mm.BEiT', arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=False,
              use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True, layer_scale_init_value=0.1,
              drop_path_rate=0.0, cls_pretrain=dict(early_layers=EARLY, head_layers=2), init_mode='pretrain')
    return dict(backbone=bb, head=dict(type='beit_mm.BEiTMIMHead', embed_dims=DIM, vocab_size=VOCAB),
                target_generator=dict(type='beit_mm.DALLEEncoder', group_count=4, n_hid=8, n_blk_per_group=1,
                                      vocab_size=VOCAB, channels_last=False),
                data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[123.675, 116.28, 103.53],
                                       std=[58.395, 57.12, 57.375]))


def make_batch(b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(b, 3, 32, 32, generator=g)
    mask = torch.zeros(b, 4, 4, dtype=torch.bool)
    mask[0, :2, :2] = True
    mask[1, 1:, 3] = True
    mask[1, 3, 0] = True
    target = torch.randint(0, VOCAB, (b, 16), generator=g)
    return images, mask, target


def test_cls_pretrain_forward_matches_mmpretrain():
    """mmpretrain 1.2.0's BEiTPretrainViT + BEiTV2Neck (its own implementation of unilm modeling_pretrain.py
    ``VisionTransformerForMaskedImageModelingCLS.forward_features``, lines 307-333: mask tokens, blocks with the
    shared bias, ``cat([x[:, [0]], early_states])`` through ``cls_pt_layers``, the shared ``norm`` on both) with the
    same weights: both token sets equal within 1e-5 (fp32)."""
    torch.manual_seed(0)
    ref = mmpretrain_beitv2().eval()
    randomize_(ref, seed=1)
    m = v2_backbone().eval()
    converted = convert_beit(ref.state_dict(), 'mmpretrain', keep_mim_head=True, expand_shared_bias=False)
    m.load_state_dict({k: v for k, v in converted.items() if not k.startswith('lm_head.')}, strict=True)
    images, mask, _ = make_batch()
    with torch.no_grad():
        ours = m.forward_masked(images, mask)
        expected = ref.neck(ref.backbone(images, mask), rel_pos_bias=ref.backbone.shared_rel_pos_bias)
    assert isinstance(ours, tuple) and len(ours) == 2
    for a, b in zip(ours, expected):
        assert a.shape == b.shape == (2, 16, DIM) and (a - b).abs().max() <= 1e-5
    assert (ours[0] - ours[1]).abs().max() > 1e-3  # the two sets really differ
    # the first set is v1's forward_masked (the same backbone without the switch gives it)
    v1 = BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=False, use_shared_rel_pos_bias=True,
              with_mask_token=True, final_norm=True, drop_path_rate=0.0).eval()
    v1.load_state_dict({k: v for k, v in m.state_dict().items() if not k.startswith('cls_pt_layers.')})
    with torch.no_grad():
        assert (v1.forward_masked(images, mask) - ours[0]).abs().max() <= 1e-6


def test_cls_pretrain_layers_init_and_drop_path_follow_unilm():
    """unilm: cls_pt_layers get drop-path rates linspace(0, dpr, max(depth, early + head))[early:early + head]
    (line 280) and keep PyTorch's default Linear init (they are built after _init_weights ran, lines 272-288),
    rescaled by 1/sqrt(2 * (early + i + 1)) (fix_init_cls_pt_weight, lines 299-305)."""
    torch.manual_seed(0)
    m = v2_backbone(drop_path_rate=0.1)
    m.init_weights()
    dpr = torch.linspace(0, 0.1, max(DEPTH, EARLY + 2)).tolist()
    assert [blk.drop_path.drop_prob for blk in m.cls_pt_layers] == pytest.approx(dpr[EARLY:EARLY + 2])
    for i, blk in enumerate(m.cls_pt_layers):
        bound = 1 / math.sqrt(DIM)  # nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform a=sqrt 5)
        for name, w, fan_in in (('qkv', blk.attn.qkv.weight, DIM), ('fc1', blk.mlp.fc1.weight, DIM)):
            b = 1 / math.sqrt(fan_in)
            assert w.abs().max() <= b and w.abs().max() > 0.8 * b, name
        scale = math.sqrt(2.0 * (EARLY + i + 1))
        proj = blk.attn.proj.weight
        assert proj.abs().max() <= bound / scale and proj.abs().max() > 0.8 * bound / scale
        fc2_bound = 1 / math.sqrt(blk.mlp.fc2.in_features)
        assert blk.mlp.fc2.weight.abs().max() <= fc2_bound / scale
        assert torch.equal(blk.gamma_1, torch.full((DIM, ), 0.1))
    # the main blocks keep unilm's trunc-normal (|w| <= 0.02 before rescaling)
    assert m.blocks[0].attn.qkv.weight.abs().max() <= 0.02


def test_cls_pretrain_validation_errors():
    with pytest.raises(ValueError, match='early_layers and head_layers'):
        BEiT(arch=ARCH, img_size=32, patch_size=8, with_mask_token=True, final_norm=True,
             cls_pretrain=dict(early_layers=3))
    with pytest.raises(ValueError, match=r'early_layers must be in \[1, 4\]'):
        BEiT(arch=ARCH, img_size=32, patch_size=8, with_mask_token=True, final_norm=True,
             cls_pretrain=dict(early_layers=5, head_layers=2))
    with pytest.raises(ValueError, match='with_mask_token=True'):
        BEiT(arch=ARCH, img_size=32, patch_size=8, final_norm=True, cls_pretrain=dict(early_layers=2, head_layers=2))
    cfg = v2_cfg()
    cfg['head'] = dict(type='beit_mm.PixelRegressionHead', embed_dims=DIM, patch_size=8)
    cfg['target_generator'] = dict(type='beit_mm.PatchPixelTarget', patch_size=8)
    with pytest.raises(ValueError, match='shared lm_head'):
        BEiTPretrain(**cfg)


def test_loss_is_both_cross_entropies_and_reaches_every_parameter():
    """unilm engine_for_pretraining.py lines 60-66: loss_1 = CE(lm_head(x[mask]), labels), loss_2 = CE(lm_head(
    x_cls_pt[mask]), labels), loss = loss_1 + loss_2; the mmengine total (sum of the 'loss' keys) is that sum."""
    torch.manual_seed(0)
    model = BEiTPretrain(**v2_cfg())
    model.init_weights()
    images, mask, target = make_batch()
    tokens = model.extract_feat(images, mask)
    out = model.head.loss(tokens, target, mask.flatten(1))
    m = mask.flatten(1)
    lm = model.head.lm_head
    loss_1 = F.cross_entropy(lm(tokens[0][m]), target[m])
    loss_2 = F.cross_entropy(lm(tokens[1][m]), target[m])
    assert (out['loss'] - loss_1).abs() <= 1e-6 and (out['loss_cls_pt'] - loss_2).abs() <= 1e-6
    assert out['mim_acc_cls_pt'] == (lm(tokens[1][m]).argmax(-1) == target[m]).float().mean()
    total, log = model.parse_losses(out)
    assert (total - (loss_1 + loss_2)).abs() <= 1e-6 and set(log) >= {'loss', 'loss_cls_pt', 'mim_acc_cls_pt'}
    model.zero_grad()
    total.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing  # DDP needs no find_unused_parameters (unilm sets it; here every parameter is used)
    assert model.backbone.cls_pt_layers[1].mlp.fc2.weight.grad.abs().sum() > 0
    assert model.backbone.mask_token.grad.abs().sum() > 0


def test_raw_tokenizer_view_for_vqkd():
    """The tokenizer view reaches the target generator as float RGB 0..255 (VQ-KD maps it to
    [-1, 1] itself); the backbone view is (x - ImageNet mean) / std after BGR -> RGB."""
    from mmpretrain.structures import DataSample
    g = torch.Generator().manual_seed(0)
    views = [torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=g) for _ in range(2)]
    tok_views = [torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=g) for _ in range(2)]
    masks = [torch.eye(4, dtype=torch.bool) for _ in range(2)]
    pre = MIMDataPreprocessor(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
    out = pre(dict(inputs=[[v, t] for v, t in zip(views, tok_views)],
                   data_samples=[DataSample().set_mask(m) for m in masks]))['inputs']
    assert torch.equal(out['target_images'], torch.stack(tok_views).flip(1).float())
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    assert (out['images'] - (torch.stack(views).flip(1).float() - mean) / std).abs().max() <= 1e-5


def mmpretrain_beitv2(drop_path_rate=0.0):
    """mmpretrain 1.2.0's BEiT v2 (configs/beitv2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py at toy size):
    BEiTPretrainViT(out_indices=[early - 1, -1], final_norm=False) + BEiTV2Neck + BEiTV2Head + VQKD."""
    from mmpretrain.models import BEiT as MMPBEiT
    arch = dict(embed_dims=DIM, num_layers=DEPTH, num_heads=HEADS, feedforward_channels=2 * DIM)
    vqkd_encoder = dict(arch=dict(embed_dims=DIM, num_layers=1, num_heads=HEADS, feedforward_channels=2 * DIM),
                        img_size=32, patch_size=8, out_indices=-1, drop_path_rate=0., final_norm=True,
                        out_type='featmap', with_cls_token=True, use_abs_pos_emb=True, use_rel_pos_bias=False,
                        use_shared_rel_pos_bias=False, layer_scale_init_value=0., norm_cfg=dict(type='LN', eps=1e-6))
    return MMPBEiT(
        backbone=dict(type='BEiTPretrainViT', arch=arch, img_size=32, patch_size=8, out_indices=[EARLY - 1, -1],
                      drop_path_rate=drop_path_rate, final_norm=False, out_type='raw', layer_scale_init_value=0.1),
        # BEiTV2Neck reads arch['depth'] (beitv2_neck.py) where BEiTViT reads arch['num_layers']
        neck=dict(type='BEiTV2Neck', num_layers=2, early_layers=EARLY, backbone_arch=dict(arch, depth=DEPTH),
                  drop_path_rate=drop_path_rate, layer_scale_init_value=0.1),
        head=dict(type='BEiTV2Head', embed_dims=DIM, num_embed=VOCAB, loss=dict(type='CrossEntropyLoss')),
        target_generator=dict(type='VQKD', encoder_config=vqkd_encoder, num_embed=VOCAB, embed_dims=8,
                              quantize_kmeans_init=False),
        data_preprocessor=dict(type='TwoNormDataPreprocessor', mean=[123.675, 116.28, 103.53],
                               std=[58.395, 57.12, 57.375], second_mean=[127.5] * 3, second_std=[127.5] * 3,
                               to_rgb=True))


def test_parity_with_mmpretrain_beitv2():
    """Same weights (mmpretrain checkpoint layout -> convert_beit(source='mmpretrain', keep_mim_head=True)), same
    masks and targets (mmpretrain's VQKD ids): loss_1 / loss_2 of mmpretrain 1.2.0's BEiTV2Head equal beit_mm's
    loss / loss_cls_pt within 1e-4 (fp32)."""
    from mmpretrain.structures import DataSample
    torch.manual_seed(0)
    ref = mmpretrain_beitv2().eval()
    randomize_(ref, seed=1)
    randomize_(ref.target_generator, seed=3, std=1.0)
    ours = BEiTPretrain(**v2_cfg()).eval()
    converted = convert_beit(ref.state_dict(), 'mmpretrain', keep_mim_head=True, expand_shared_bias=False)
    assert {'norm.weight', 'cls_pt_layers.1.gamma_2', 'lm_head.weight', 'mask_token'} <= set(converted)
    lm_head = {k[len('lm_head.'):]: converted.pop(k) for k in list(converted) if k.startswith('lm_head.')}
    ours.backbone.load_state_dict(converted, strict=True)
    ours.head.lm_head.load_state_dict(lm_head, strict=True)
    images, mask, _ = make_batch()
    target_images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(5)) * 2 - 1
    samples = [DataSample().set_mask(m) for m in mask]
    with torch.no_grad():
        ids = ref.target_generator(target_images)
        ref_losses = ref.loss([images, target_images], samples)
        ours_losses = ours.head.loss(ours.extract_feat(images, mask), ids, mask.flatten(1))
    assert ids.shape == (2, 16) and ids.unique().numel() > 2
    assert torch.isfinite(ref_losses['loss_1']) and ref_losses['loss_1'] > 0.1
    assert (ref_losses['loss_1'] - ours_losses['loss']).abs() <= 1e-4
    assert (ref_losses['loss_2'] - ours_losses['loss_cls_pt']).abs() <= 1e-4
    assert (ref_losses['loss_1'] - ref_losses['loss_2']).abs() > 1e-3  # the two paths really differ
