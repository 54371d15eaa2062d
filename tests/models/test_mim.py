"""BEiT masked image modeling: two-view pipeline, data preprocessor, MIM head, the BEiTPretrain algorithm; the
preprocessor against exact formulas (<= 1e-6), the head against ``F.cross_entropy`` by hand, the algorithm against
mmpretrain 1.2.0's BEiT pretraining with the same weights (fp32 loss <= 1e-4)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmcv.transforms import Compose
from mmengine.optim import OptimWrapper

from beit_mm.converters.beit import convert_beit
from beit_mm.converters.dalle import convert_dalle
from beit_mm.data.transforms.crop import TwoViewRandomResizedCrop, random_resized_crop_box
from beit_mm.models.heads import BEiTMIMHead
from beit_mm.models.selfsup import BEiTPretrain, MIMDataPreprocessor
from beit_mm.models.tokenizers import DALLEEncoder, map_pixels

from ..conftest import randomize_

DIM, VOCAB = 32, 16


def tiny_cfg(tokenizer_ckpt=None) -> dict:
    """BEiT (2 blocks, 32 wide) on 32x32 images with 8x8 patches (4x4 grid); DALL-E encoder with 4 groups on the
    32x32 tokenizer view (4x4 tokens), vocab 16."""
    return dict(
        backbone=dict(type='beit_mm.BEiT', arch=dict(embed_dims=DIM, num_layers=2, num_heads=2, mlp_ratio=2.0),
                      img_size=32, patch_size=8, use_rel_pos_bias=False, use_shared_rel_pos_bias=True,
                      with_mask_token=True, final_norm=True, layer_scale_init_value=0.1, drop_path_rate=0.0),
        head=dict(type='beit_mm.BEiTMIMHead', embed_dims=DIM, vocab_size=VOCAB),
        target_generator=dict(type='beit_mm.DALLEEncoder', group_count=4, n_hid=8, n_blk_per_group=1,
                              vocab_size=VOCAB, channels_last=False,
                              init_cfg=None if tokenizer_ckpt is None else dict(type='Pretrained',
                                                                                checkpoint=tokenizer_ckpt)),
        data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3))


def make_inputs(b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(b, 3, 32, 32, generator=g)
    # a 4x4 grid of flat random colours, so the tiny random tokenizer gives several different ids
    cells = torch.rand(b, 3, 4, 4, generator=g)
    target_images = cells.repeat_interleave(8, 2).repeat_interleave(8, 3) * 255  # RGB 0..255
    mask = torch.zeros(b, 4, 4, dtype=torch.bool)
    mask[0, :2, :2] = True
    mask[1, 1:, 3] = True
    mask[1, 3, 0] = True
    return dict(images=images, target_images=target_images, mask=mask)


# ------------------------------------------------------------------------------------------------ pipeline
def smooth_image(h=96, w=128):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([127 + 100 * np.sin(xx / 17.0), 127 + 100 * np.cos(yy / 13.0), 2 * yy], -1)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_two_views_come_from_the_same_crop():
    """View 1 downsampled to view 2's size matches view 2 (same content); a view of another crop does not."""
    np.random.seed(0)
    img = smooth_image()
    t = TwoViewRandomResizedCrop(size=64, tokenizer_size=32, scale=(0.3, 0.6))
    out = t(dict(img=img.copy()))
    view, tok = out['img']
    assert view.shape == (64, 64, 3) and tok.shape == (32, 32, 3) and view.dtype == np.uint8
    down = view.reshape(32, 2, 32, 2, 3).mean((1, 3))
    err_same = np.abs(down - tok.astype(np.float32)).mean()
    other = t(dict(img=img.copy()))
    assert other['crop_bbox'] != out['crop_bbox']
    err_other = np.abs(down - other['img'][1].astype(np.float32)).mean()
    assert err_same < 2.0, err_same
    assert err_other > 5 * err_same, (err_same, err_other)
    top, left, h, w = out['crop_bbox']
    assert 0 <= top and top + h <= 96 and 0 <= left and left + w <= 128
    assert 0.3 * 96 * 128 * 0.9 <= h * w <= 0.6 * 96 * 128 * 1.1


def test_crop_box_reaches_the_last_offset_and_full_image():
    """unilm/torchvision bounds (inclusive offsets, crops as large as the image); mmpretrain's exclude both."""
    rng = np.random.RandomState(0)
    boxes = [random_resized_crop_box(10, 10, (0.9, 1.0), (0.95, 1.05), rng) for _ in range(300)]
    assert any(b[0] + b[2] == 10 and b[2] < 10 for b in boxes)  # a crop touching the bottom edge
    assert any(b[2] == 10 and b[3] == 10 for b in boxes)  # the whole image


def test_pipeline_packs_both_views_and_mask():
    import mmpretrain.datasets  # noqa: F401  (registers PackInputs/ColorJitter)
    pipeline = Compose([
        dict(type='mmpretrain.ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
        dict(type='mmpretrain.RandomFlip', prob=0.5, direction='horizontal'),
        dict(type='beit_mm.TwoViewRandomResizedCrop', size=64, tokenizer_size=32),
        dict(type='beit_mm.BEiTMaskGenerator', input_size=4, num_masking_patches=6, min_num_patches=2, seed=0),
        dict(type='mmpretrain.PackInputs'),
    ])
    np.random.seed(0)
    samples = [pipeline(dict(img=smooth_image(), img_shape=(96, 128), ori_shape=(96, 128))) for _ in range(2)]
    assert [tuple(x.shape) for x in samples[0]['inputs']] == [(3, 64, 64), (3, 32, 32)]
    assert samples[0]['data_samples'].mask.dtype == torch.bool and samples[0]['data_samples'].mask.shape == (4, 4)
    pre = MIMDataPreprocessor(mean=[127.5] * 3, std=[127.5] * 3)
    out = pre(dict(inputs=[s['inputs'] for s in samples], data_samples=[s['data_samples'] for s in samples]))
    assert out['inputs']['images'].shape == (2, 3, 64, 64)
    assert out['inputs']['target_images'].shape == (2, 3, 32, 32)
    assert out['inputs']['mask'].shape == (2, 4, 4) and out['inputs']['mask'].sum(dim=(1, 2)).le(6).all()


# ---------------------------------------------------------------------------------------------- preprocessor
def test_preprocessor_values_exact_and_mask_batching():
    from mmpretrain.models.utils.data_preprocessor import TwoNormDataPreprocessor
    from mmpretrain.structures import DataSample
    g = torch.Generator().manual_seed(0)
    v1 = [torch.randint(0, 256, (3, 8, 8), generator=g, dtype=torch.uint8) for _ in range(2)]
    v2 = [torch.randint(0, 256, (3, 4, 4), generator=g, dtype=torch.uint8) for _ in range(2)]
    masks = [torch.rand(2, 2, generator=g) > 0.5 for _ in range(2)]
    samples = [DataSample().set_mask(m) for m in masks]
    pre = MIMDataPreprocessor(mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True)
    out = pre(dict(inputs=[[a, b] for a, b in zip(v1, v2)], data_samples=samples))['inputs']
    rgb1 = torch.stack(v1)[:, [2, 1, 0]].float()
    rgb2 = torch.stack(v2)[:, [2, 1, 0]].float()
    assert torch.equal(out['images'], (rgb1 - 127.5) / 127.5)
    assert torch.equal(out['target_images'], rgb2)  # 0..255: DALL-E's map_pixels(x / 255) is the tokenizer's
    assert out['mask'].dtype == torch.bool and torch.equal(out['mask'], torch.stack(masks))
    # default_collate layout gives the same, and equals mmpretrain's disguised-constant form of map_pixels
    out2 = pre(dict(inputs=[torch.stack(v1), torch.stack(v2)], data_samples=samples))['inputs']
    assert torch.equal(out2['images'], out['images']) and torch.equal(out2['target_images'], out['target_images'])
    mmp = TwoNormDataPreprocessor(mean=[127.5] * 3, std=[127.5] * 3, second_mean=[-31.875] * 3,
                                  second_std=[318.75] * 3, to_rgb=True)
    ref = mmp(dict(inputs=[torch.stack(v1), torch.stack(v2)], data_samples=samples))['inputs']
    assert (ref[1] - map_pixels(out['target_images'] / 255)).abs().max() <= 1e-6
    with pytest.raises(ValueError, match='BEiTMaskGenerator'):
        pre(dict(inputs=[[a, b] for a, b in zip(v1, v2)], data_samples=[DataSample(), DataSample()]))
    unmasked = [DataSample().set_mask(torch.zeros(2, 2, dtype=torch.bool)) for _ in range(2)]
    with pytest.raises(ValueError, match='no position of the batch is masked'):
        pre(dict(inputs=[[a, b] for a, b in zip(v1, v2)], data_samples=unmasked))


# ------------------------------------------------------------------------------------------------------ head
def test_head_loss_and_accuracy_by_hand():
    torch.manual_seed(0)
    head = BEiTMIMHead(embed_dims=8, vocab_size=5)
    head.init_weights()
    tokens = torch.randn(2, 6, 8)
    target = torch.randint(0, 5, (2, 6))
    mask = torch.tensor([[1, 0, 0, 1, 1, 0], [0, 0, 1, 0, 0, 0]], dtype=torch.bool)
    out = head.loss(tokens, target, mask)
    idx = [(0, 0), (0, 3), (0, 4), (1, 2)]
    logits = torch.stack([head.lm_head(tokens[b, n]) for b, n in idx])
    labels = torch.stack([target[b, n] for b, n in idx])
    assert (out['loss'] - F.cross_entropy(logits, labels)).abs() <= 1e-6
    assert out['mim_acc'] == (logits.argmax(-1) == labels).float().mean()
    # perfect logits -> accuracy 1
    target2 = target.clone()
    for b, n in idx:
        target2[b, n] = head.lm_head(tokens[b, n]).argmax()
    assert head.loss(tokens, target2, mask)['mim_acc'] == 1.0
    # unmasked targets do not matter
    target3 = target.clone()
    target3[~mask] = (target3[~mask] + 1) % 5
    assert torch.equal(head.loss(tokens, target3, mask)['loss'], out['loss'])
    # no masked position: NaN, never a silent 0; the preprocessor refuses such a batch before it reaches the device
    assert torch.isnan(head.loss(tokens, target, torch.zeros_like(mask))['loss'])


def test_head_loads_lm_head_of_converted_unilm_checkpoint(tmp_path):
    from beit_mm.models.backbones import BEiT
    src = BEiT(arch=dict(embed_dims=8, num_layers=1, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=8,
               use_rel_pos_bias=False, use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True).state_dict()
    src['lm_head.weight'], src['lm_head.bias'] = torch.randn(5, 8), torch.randn(5)
    converted = convert_beit(src, 'unilm', keep_mim_head=True, expand_shared_bias=False)
    torch.save(converted, tmp_path / 'c.pth')
    head = BEiTMIMHead(8, 5, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'c.pth')))
    head.init_weights()
    assert torch.equal(head.lm_head.weight, src['lm_head.weight'])
    assert torch.equal(head.lm_head.bias, src['lm_head.bias'])
    torch.save(convert_beit(src, 'unilm'), tmp_path / 'no_head.pth')
    with pytest.raises(KeyError, match='keep-mim-head'):
        BEiTMIMHead(8, 5, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'no_head.pth'))).init_weights()


# ------------------------------------------------------------------------------------------------- algorithm
def build_tiny(tmp_path):
    tok = DALLEEncoder(group_count=4, n_hid=8, n_blk_per_group=1, vocab_size=VOCAB, channels_last=False)
    randomize_(tok, seed=3, std=1.0)
    torch.save(tok.state_dict(), tmp_path / 'tok.pth')
    model = BEiTPretrain(**tiny_cfg(str(tmp_path / 'tok.pth')))
    model.init_weights()
    return model, tok


def test_train_step_gradients_and_masked_only(tmp_path):
    torch.manual_seed(0)
    model, tok = build_tiny(tmp_path)
    assert torch.equal(model.target_generator.blocks.input.weight, tok.blocks.input.weight)  # checkpoint loaded
    inputs = make_inputs()
    # loss equals the head on the final-normed masked tokens vs the tokenizer's ids, computed step by step
    out = model(inputs, mode='loss')
    tokens, _ = model.backbone.forward_tokens(inputs['images'], inputs['mask'])
    ids = tok.get_targets(inputs)
    assert ids.unique().numel() > 2  # the targets are not all one token
    ref = model.head.loss(tokens[-1][:, 1:], ids, inputs['mask'].flatten(1))
    assert (out['loss'] - ref['loss']).abs() <= 1e-6 and out['mim_acc'] == ref['mim_acc']
    # the mask reaches the backbone: unmasking changes the loss
    unmasked = dict(inputs, mask=inputs['mask'].clone())
    unmasked['mask'][0, 0, 0] = False
    assert (model(unmasked, mode='loss')['loss'] - out['loss']).abs() > 1e-6
    # gradients reach every trainable parameter (DDP-safe), including mask_token and the shared bias
    model.zero_grad()
    out['loss'].backward()
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert not [n for n, p in trainable.items() if p.grad is None]
    assert model.backbone.mask_token.grad.abs().sum() > 0
    assert model.backbone.rel_pos_bias.relative_position_bias_table.grad.abs().sum() > 0
    assert not any(p.requires_grad for p in model.target_generator.parameters())
    # one optimizer step through mmengine's train_step changes the backbone, not the tokenizer
    optim = OptimWrapper(torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3))
    before = model.backbone.mask_token.detach().clone()
    tok_before = model.target_generator.blocks.output.conv.weight.clone()
    from mmpretrain.structures import DataSample
    batch = dict(inputs=[[torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)] * 2 for _ in range(2)],
                 data_samples=[DataSample().set_mask(m) for m in inputs['mask']])
    log = model.train_step(batch, optim)
    assert set(log) == {'loss', 'mim_acc', 'mim_acc_baseline'} and torch.isfinite(log['loss'])
    assert not torch.equal(before, model.backbone.mask_token)
    assert torch.equal(tok_before, model.target_generator.blocks.output.conv.weight)
    model.train()
    assert not model.target_generator.training


def test_unmasked_targets_do_not_contribute(tmp_path):
    """Changing the tokenizer's ids at unmasked positions leaves the loss unchanged (the head sees the algorithm's
    tokens and two target maps that differ only off the mask)."""
    torch.manual_seed(0)
    model, _ = build_tiny(tmp_path)
    inputs = make_inputs()
    mask = inputs['mask'].flatten(1)
    tokens = model.extract_feat(inputs['images'], inputs['mask'])
    ids = model.target_generator.get_targets(inputs)
    changed = torch.where(mask, ids, (ids + 1) % VOCAB)
    assert torch.equal(model.head.loss(tokens, ids, mask)['loss'], model.head.loss(tokens, changed, mask)['loss'])
    changed_masked = torch.where(mask, (ids + 1) % VOCAB, ids)
    assert not torch.equal(model.head.loss(tokens, ids, mask)['loss'],
                           model.head.loss(tokens, changed_masked, mask)['loss'])


def test_layer_depth_delegates_to_backbone(tmp_path):
    model, _ = build_tiny(tmp_path)
    assert model.get_layer_depth('backbone.patch_embed.proj.weight') == (0, 4)
    assert model.get_layer_depth('backbone.blocks.1.attn.qkv.weight') == (2, 4)
    assert model.get_layer_depth('head.lm_head.weight') == (3, 4)
    with pytest.raises(ValueError, match='with_mask_token'):
        cfg = tiny_cfg()
        cfg['backbone']['with_mask_token'] = False
        BEiTPretrain(**cfg)


def test_parity_with_mmpretrain_beit_pretraining():
    """Same weights in mmpretrain 1.2.0's BEiT(BEiTPretrainViT, BEiTV1Head, DALL-E) and beit_mm's BEiTPretrain:
    the MIM loss agrees to 1e-4 (fp32)."""
    from mmpretrain.models import BEiT as MMPBEiT
    from mmpretrain.structures import DataSample
    torch.manual_seed(0)
    ref = MMPBEiT(
        backbone=dict(type='BEiTPretrainViT', arch=dict(embed_dims=DIM, num_layers=2, num_heads=2,
                                                        feedforward_channels=2 * DIM),
                      img_size=32, patch_size=8, drop_path_rate=0.0, final_norm=True, out_type='raw',
                      layer_scale_init_value=0.1),
        head=dict(type='BEiTV1Head', embed_dims=DIM, num_embed=VOCAB, loss=dict(type='CrossEntropyLoss')),
        target_generator=dict(type='DALL-E', n_hid=8, n_blk_per_group=1, vocab_size=VOCAB),
        data_preprocessor=dict(type='TwoNormDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3,
                               second_mean=[-31.875] * 3, second_std=[318.75] * 3, to_rgb=True)).eval()
    randomize_(ref, seed=1)
    randomize_(ref.target_generator, seed=3, std=1.0)  # varied token ids (see make_inputs)
    ours = BEiTPretrain(**tiny_cfg()).eval()
    sd = ref.state_dict()
    backbone = convert_beit({k[len('backbone.'):]: v for k, v in sd.items() if k.startswith('backbone.')},
                            'mmpretrain', keep_mim_head=True, expand_shared_bias=False)
    ours.backbone.load_state_dict(backbone, strict=True)
    ours.head.lm_head.load_state_dict({'weight': sd['head.cls_head.weight'], 'bias': sd['head.cls_head.bias']})
    ours.target_generator.load_state_dict(convert_dalle(sd, 'mmpretrain'), strict=True)
    inputs = make_inputs()
    samples = [DataSample().set_mask(m) for m in inputs['mask']]
    with torch.no_grad():
        ref_loss = ref.loss([inputs['images'], map_pixels(inputs['target_images'] / 255)], samples)['loss']
        our_loss = ours.loss(inputs)['loss']
    assert ours.target_generator.get_targets(inputs).unique().numel() > 2
    assert torch.isfinite(ref_loss) and ref_loss > 0.1
    assert (ref_loss - our_loss).abs() <= 1e-4, (ref_loss, our_loss)
