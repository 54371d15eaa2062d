"""CvT masked image modeling (``BEiTPretrain`` over ``CvT.forward_masked``). No toolkit implements it, so the references
are explicit loops (mask upsampling, leaked-pixel map, exact), the loss done step by step (<= 1e-6), output
perturbation for the leak claims, and the demo config through tools/train.py."""
import os
import re

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope

from beit_mm.models.backbones import CvT
from beit_mm.models.layers.mask_utils import leaked_pixels, upsample_mask
from beit_mm.models.selfsup import BEiTPretrain
from beit_mm.models.tokenizers import DALLEEncoder

from ..conftest import ROOT, randomize_, run_tool

CFG_FULL = os.path.join(ROOT, 'configs/cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py')
CFG_DEMO = os.path.join(ROOT, 'configs/demo/beit_cvt-13-tiny_1xb16-coslr-0.3k_ade20k-demo-96px.py')
DIMS, VOCAB, SIZE, PATCH = [8, 16, 24], 16, 64, 16
GRID = SIZE // PATCH  # 4x4 patch grid = stage-2 grid; stage-0 grid 16x16
ARCH = dict(embed_dims=DIMS, depths=[1, 1, 1], num_heads=[1, 2, 2])


def tiny_cfg(zero_masked_pixels: bool = True, tokenizer_ckpt=None) -> dict:
    return dict(
        backbone=dict(type='beit_mm.CvT', arch=ARCH, drop_path_rate=0.0, out_indices=(2, ), final_norm=True,
                      with_mask_token=True),
        head=dict(type='beit_mm.BEiTMIMHead', embed_dims=DIMS[-1], vocab_size=VOCAB),
        target_generator=dict(type='beit_mm.DALLEEncoder', group_count=4, n_hid=8, n_blk_per_group=1,
                              vocab_size=VOCAB, channels_last=False,
                              init_cfg=None if tokenizer_ckpt is None else dict(type='Pretrained',
                                                                                checkpoint=tokenizer_ckpt)),
        data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3),
        zero_masked_pixels=zero_masked_pixels)


def build(zero_masked_pixels: bool = True, seed: int = 1) -> BEiTPretrain:
    torch.manual_seed(0)
    model = BEiTPretrain(**tiny_cfg(zero_masked_pixels))
    randomize_(model.backbone, seed=seed)
    randomize_(model.head, seed=seed + 1)
    randomize_(model.target_generator, seed=3, std=1.0)  # varied token ids
    return model


def make_inputs(b: int = 2, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(b, 3, SIZE, SIZE, generator=g)
    cells = torch.rand(b, 3, GRID, GRID, generator=g)  # flat colours per patch: several different token ids
    target_images = cells.repeat_interleave(8, 2).repeat_interleave(8, 3) * 255  # RGB 0..255
    mask = torch.zeros(b, GRID, GRID, dtype=torch.bool)
    mask[0, 1, 1] = True  # isolated patch
    mask[1, 0:3, 1:4] = True  # 3x3 block: (1, 2) has all 8 neighbours masked
    return dict(images=images, target_images=target_images, mask=mask)


# -------------------------------------------------------------------------------------------------- mask utils
def test_upsample_mask_values():
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(2, 3, 5, generator=g) > 0.5
    out = upsample_mask(mask, (12, 10))
    ref = torch.zeros(2, 12, 10, dtype=torch.bool)
    for b in range(2):
        for i in range(12):
            for j in range(10):
                ref[b, i, j] = mask[b, i // 4, j // 2]
    assert out.dtype == torch.bool and torch.equal(out, ref)
    with pytest.raises(ValueError, match='does not divide'):
        upsample_mask(mask, (13, 10))


def leaked_by_loops(mask: torch.Tensor, size: int) -> torch.Tensor:
    """Reference: every visible stage-0 token (k7 s4 p2) marks the masked pixels of its receptive field."""
    n0 = (size + 4 - 7) // 4 + 1
    patch = size // mask.shape[1]
    out = torch.zeros(mask.shape[0], size, size, dtype=torch.bool)
    for b in range(mask.shape[0]):
        for i in range(n0):
            for j in range(n0):
                if mask[b, i * 4 // patch, j * 4 // patch]:
                    continue
                for y in range(max(0, 4 * i - 2), min(size, 4 * i + 5)):
                    for x in range(max(0, 4 * j - 2), min(size, 4 * j + 5)):
                        out[b, y, x] |= bool(mask[b, y // patch, x // patch])
    return out


def test_leaked_pixels_matches_receptive_fields():
    mask = make_inputs()['mask']
    leak = leaked_pixels(mask, (SIZE, SIZE), 7, 4, 2)
    assert torch.equal(leak, leaked_by_loops(mask, SIZE))
    # an isolated masked 16 px patch leaks rows/columns 0, 14, 15: 256 - 13 * 13 = 87 pixels
    iso = leak[0, 16:32, 16:32]
    edge = torch.tensor([i in (0, 14, 15) for i in range(16)])
    assert iso.sum() == 87 and torch.equal(iso, edge[:, None] | edge[None, :])
    # a masked patch with all 8 neighbours masked leaks nothing; a fully masked image neither
    assert not leak[1, 16:32, 32:48].any()
    assert not leaked_pixels(torch.ones(1, GRID, GRID, dtype=torch.bool), (SIZE, SIZE), 7, 4, 2).any()


# ---------------------------------------------------------------------------------------------------- backbone
def test_mask_token_option_keeps_default_behaviour():
    torch.manual_seed(0)
    plain = CvT(arch=ARCH, out_indices=(0, 1, 2, 3)).eval()
    torch.manual_seed(0)
    masked = CvT(arch=ARCH, out_indices=(0, 1, 2, 3), with_mask_token=True).eval()
    sd_plain, sd_masked = plain.state_dict(), masked.state_dict()
    assert set(sd_masked) - set(sd_plain) == {'stage0.mask_token'} and set(sd_plain) <= set(sd_masked)
    assert all(torch.equal(v, sd_masked[k]) for k, v in sd_plain.items())  # same init draws
    x = torch.randn(2, 3, SIZE, SIZE)
    no_mask = torch.zeros(2, 16, 16, dtype=torch.bool)
    for a, b in zip(plain(x), masked(x)):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match='with_mask_token=True'):
        plain(x, no_mask)
    with pytest.raises(ValueError, match='upsample_mask'):
        masked(x, torch.zeros(2, GRID, GRID, dtype=torch.bool))


def test_masked_stage0_tokens_equal_mask_token():
    model = build().eval()
    backbone = model.backbone
    inputs = make_inputs()
    seen = {}
    handle = backbone.stage0.blocks[0].register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    mask_0 = upsample_mask(inputs['mask'], model.backbone.stage0_grid((SIZE, SIZE)))
    assert mask_0.shape == (2, 16, 16)
    backbone(inputs['images'], mask_0)
    handle.remove()
    x, m = seen['x'], mask_0.flatten(1)  # (B, 256, C_0)
    embedded, _ = backbone.stage0.patch_embed(inputs['images'])
    assert torch.equal(x[m], backbone.stage0.mask_token[0].expand(int(m.sum()), -1))
    assert torch.equal(x[~m], embedded[~m])


# ------------------------------------------------------------------------------------------------- algorithm
def test_loss_step_by_step_and_gradients():
    model = build()
    inputs = make_inputs()
    out = model(inputs, mode='loss')
    # reference by hand: zero the pixels of masked patches, mask the stage-0 tokens, classify the masked stage-2 tokens
    images, mask = inputs['images'].clone(), inputs['mask']
    mask_0 = torch.zeros(2, 16, 16, dtype=torch.bool)
    for b, i, j in mask.nonzero().tolist():
        images[b, :, PATCH * i:PATCH * (i + 1), PATCH * j:PATCH * (j + 1)] = 0
        mask_0[b, 4 * i:4 * i + 4, 4 * j:4 * j + 4] = True
    feat = model.backbone(images, mask_0)[0]  # (B, C_2, 4, 4)
    ids = model.target_generator.get_targets(inputs).view(2, GRID, GRID)
    assert ids.unique().numel() > 2
    picked = [(b, i, j) for b, i, j in mask.nonzero().tolist()]
    logits = torch.stack([model.head.lm_head(feat[b, :, i, j]) for b, i, j in picked])
    labels = torch.stack([ids[b, i, j] for b, i, j in picked])
    assert (out['loss'] - F.cross_entropy(logits, labels)).abs() <= 1e-6
    assert out['mim_acc'] == (logits.argmax(-1) == labels).float().mean()
    assert model(inputs, mode='tensor').shape == (2, GRID * GRID, DIMS[-1])
    # every trainable parameter gets a gradient (DDP-safe), the mask token a non-zero one; the tokenizer is frozen
    model.zero_grad()
    out['loss'].backward()
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert not [n for n, p in trainable.items() if p.grad is None]
    assert model.backbone.stage0.mask_token.grad.abs().sum() > 0
    assert model.backbone.stage2.cls_token.grad.abs().sum() > 0
    assert not any(p.requires_grad for p in model.target_generator.parameters())
    # one mmengine train_step from uint8 views changes the mask token, not the tokenizer
    from mmpretrain.structures import DataSample
    optim = OptimWrapper(torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3))
    before = model.backbone.stage0.mask_token.detach().clone()
    tok_before = model.target_generator.blocks.output.conv.weight.clone()
    batch = dict(inputs=[[torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8),
                          torch.randint(0, 256, (3, SIZE // 2, SIZE // 2), dtype=torch.uint8)] for _ in range(2)],
                 data_samples=[DataSample().set_mask(m) for m in inputs['mask']])
    log = model.train_step(batch, optim)
    assert set(log) == {'loss', 'mim_acc', 'mim_acc_baseline'} and torch.isfinite(log['loss'])
    assert not torch.equal(before, model.backbone.stage0.mask_token)
    assert torch.equal(tok_before, model.target_generator.blocks.output.conv.weight)


def test_unmasked_targets_do_not_contribute():
    model = build()
    inputs = make_inputs()
    mask = inputs['mask'].flatten(1)
    tokens = model.extract_feat(inputs['images'], inputs['mask'])
    ids = model.target_generator.get_targets(inputs)
    loss = model.head.loss(tokens, ids, mask)['loss']
    assert torch.equal(loss, model.head.loss(tokens, torch.where(mask, ids, (ids + 1) % VOCAB), mask)['loss'])
    assert not torch.equal(loss, model.head.loss(tokens, torch.where(mask, (ids + 1) % VOCAB, ids), mask)['loss'])


def test_layer_depth_and_config_errors():
    model = build()
    assert model.get_layer_depth('backbone.stage0.mask_token') == (0, 5)
    assert model.get_layer_depth('backbone.stage2.blocks.0.attn.proj.weight') == (3, 5)
    assert model.get_layer_depth('head.lm_head.weight') == (4, 5)
    for key, value, match in (('with_mask_token', False, 'with_mask_token=True'),
                              ('out_indices', (0, 1, 2), 'out_indices=\\(2,\\)'),
                              ('final_norm', False, 'final_norm=True')):
        cfg = tiny_cfg()
        cfg['backbone'][key] = value
        with pytest.raises(ValueError, match=match):
            BEiTPretrain(**cfg)


# ------------------------------------------------------------------------------------------------------- leaks
def pixel_response(model: BEiTPretrain, images: torch.Tensor, mask: torch.Tensor, b: int, i: int, j: int):
    """Max abs change of the whole stage-2 output of sample b when each pixel of patch (i, j) moves by +3."""
    n = PATCH * PATCH
    base = images[b:b + 1].expand(n, -1, -1, -1).clone()
    moved = base.clone()
    idx = torch.arange(n)
    moved[idx, :, PATCH * i + idx // PATCH, PATCH * j + idx % PATCH] += 3.0
    m = mask[b:b + 1].expand(n, -1, -1)
    with torch.no_grad():
        diff = (model.extract_feat(moved, m) - model.extract_feat(base, m)).abs().amax((1, 2))
    return diff.view(PATCH, PATCH)


def test_overlapping_embedding_leak_is_exactly_the_predicted_border():
    """Without pixel zeroing, a pixel of a masked patch changes the model's output (any position) iff a visible
    stage-0 token reads it (``leaked_pixels``): rows/columns 0, 14, 15 next to visible patches, nothing inside."""
    model = build(zero_masked_pixels=False).eval()
    inputs = make_inputs()
    leak = leaked_pixels(inputs['mask'], (SIZE, SIZE), 7, 4, 2)
    for b, i, j in ((0, 1, 1), (1, 1, 1), (1, 1, 2)):  # isolated; block edge (left visible); block centre
        diff = pixel_response(model, inputs['images'], inputs['mask'], b, i, j)
        predicted = leak[b, PATCH * i:PATCH * (i + 1), PATCH * j:PATCH * (j + 1)]
        assert (diff[~predicted] <= 1e-6).all(), (b, i, j)
        assert (diff[predicted] > 1e-4).all(), (b, i, j)
    # the block centre leaks nothing, the left column of the block's left edge does
    assert not leak[1, 16:32, 32:48].any() and leak[1, 16:32, 16].all()


def test_interior_pixels_never_reach_the_loss_and_zeroing_closes_the_leak():
    """In training mode (BatchNorm batch statistics over all tokens) the loss is bitwise unchanged when the interior
    pixels (rows/columns 1-13) of every masked patch change; with ``zero_masked_pixels`` also when every pixel of
    every masked patch changes, while without it the border pixels do change the loss."""
    inputs = make_inputs()
    g = torch.Generator().manual_seed(5)
    noise = 3 * torch.randn(inputs['images'].shape, generator=g)
    pix = upsample_mask(inputs['mask'], (SIZE, SIZE)).unsqueeze(1)  # (B, 1, H, W)
    border = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    for k in range(GRID):
        for t in (0, 14, 15):
            border[PATCH * k + t, :] = border[:, PATCH * k + t] = True
    interior = pix & ~border
    for zero, region, same in ((False, interior, True), (False, pix, False), (True, pix, True)):
        model = build(zero_masked_pixels=zero).train()
        loss = model.loss(inputs)['loss']
        changed = dict(inputs, images=torch.where(region, inputs['images'] + noise, inputs['images']))
        loss2 = model.loss(changed)['loss']
        assert torch.equal(loss, loss2) == same, (zero, same, loss, loss2)
        if not same:
            assert (loss - loss2).abs() > 1e-4


# ----------------------------------------------------------------------------------------------------- configs
def test_full_config_recipe_and_build():
    """beit_mm's own settings of the CvT MIM config; its published values are compared with their sources by
    test_recipes.py test_config_has_the_published_values."""
    cfg = Config.fromfile(CFG_FULL)
    assert cfg.custom_imports == dict(imports=['beit_mm'], allow_failed_imports=False)
    bb = cfg.model.backbone
    assert (bb.type, bb.arch, bb.with_mask_token, bb.final_norm, bb.out_indices) == (
        'beit_mm.CvT', 'cvt-13', True, True, (2, ))
    assert (cfg.model.type, cfg.model.zero_masked_pixels) == ('beit_mm.BEiTPretrain', True)
    assert (cfg.model.head.embed_dims, cfg.model.head.vocab_size) == (384, 8192)
    assert cfg.model.target_generator.init_cfg.checkpoint == cfg.tokenizer_checkpoint
    opt = cfg.optim_wrapper
    assert (opt.type, opt.dtype) == ('beit_mm.AmpOptimWrapper', 'auto')  # bf16 where the device has it
    mask = next(t for t in cfg.train_dataloader.dataset.pipeline if t.type == 'beit_mm.BEiTMaskGenerator')
    assert mask.input_size == 14  # the 16 px patch grid of the 224 view, upsampled x4 to the stage-0 tokens
    from mmengine.registry import MODELS
    init_default_scope(cfg.default_scope)
    cfg.model.target_generator.update(n_hid=8, init_cfg=None)  # shrink only the tokenizer
    model = MODELS.build(cfg.model)
    assert type(model.backbone) is CvT and model.backbone.stage0_grid((224, 224)) == (56, 56)
    with torch.no_grad():
        feat = model.backbone(torch.zeros(1, 3, 224, 224))[0]
    assert feat.shape == (1, 384, 14, 14)


def test_demo_config_trains_two_iterations_and_checkpoint_loads_for_finetuning(tmp_path):
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=1, size=64, seed=0)
    cfg = Config.fromfile(CFG_DEMO)
    tok = DALLEEncoder(**cfg.tokenizer)
    torch.save(tok.state_dict(), tmp_path / 'tokenizer.pth')  # random weights, real key layout
    cfg.model.target_generator.init_cfg.checkpoint = str(tmp_path / 'tokenizer.pth')
    cfg.work_dir = str(tmp_path / 'work')
    dl = cfg.train_dataloader
    dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 4
    dl.dataset.data_root = str(tmp_path / 'ade')
    cfg.train_cfg.max_iters = 2
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    cfg.dump(str(tmp_path / 'mim.py'))
    proc = run_tool(['tools/train.py', str(tmp_path / 'mim.py')])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert re.search(r'Iter\(train\) \[2/2\].*loss: \d.*mim_acc: \d', log), log[-2000:]
    state = torch.load(tmp_path / 'work' / 'iter_2.pth', map_location='cpu', weights_only=True)['state_dict']
    assert 'backbone.stage0.mask_token' in state and 'head.lm_head.weight' in state
    # the fine-tuning loader takes the backbone (the mask token is reported unused)
    ft = CvT(arch=dict(cfg.model.backbone.arch), init_cfg=dict(type='Pretrained', checkpoint=str(
        tmp_path / 'work' / 'iter_2.pth'), prefix='backbone.'))
    ft.init_weights()
    assert torch.equal(ft.stage2.blocks[1].attn.proj.weight, state['backbone.stage2.blocks.1.attn.proj.weight'])
