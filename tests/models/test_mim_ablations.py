"""The MIM ablation switches, pixel targets (BEiT paper Table 4 "Recover pixels") and random masking, as parts of
``BEiTPretrain``, and the study configs that use them; ``patchify`` against MAE ``models_mae.py`` re-done with loops."""
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config

from beit_mm.data.transforms.masking import BEiTMaskGenerator, RandomMaskGenerator
from beit_mm.models.heads import PixelRegressionHead
from beit_mm.models.selfsup import BEiTPretrain
from beit_mm.models.tokenizers import PatchPixelTarget, patchify

from ..conftest import ROOT, randomize_
from .test_mim import DIM, make_inputs, tiny_cfg

STUDY = os.path.join(ROOT, 'configs', 'studies')
TOKENS = os.path.join(STUDY, 'beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py')
PIXELS = os.path.join(STUDY, 'beit_beit-tiny-p8_pixels-blockwise_1xb32-coslr-3k_shapes-64px.py')
RANDOM = os.path.join(STUDY, 'beit_beit-tiny-p8_tokens-random_1xb32-coslr-3k_shapes-64px.py')


def pixel_cfg() -> dict:
    cfg = tiny_cfg()
    cfg['head'] = dict(type='beit_mm.PixelRegressionHead', embed_dims=DIM, patch_size=8)
    cfg['target_generator'] = dict(type='beit_mm.PatchPixelTarget', patch_size=8)
    return cfg


# ------------------------------------------------------------------------------------------- pixel targets
def test_patchify_and_norm_pix_by_loops():
    g = torch.Generator().manual_seed(0)
    images = torch.randn(2, 3, 16, 24, generator=g)
    out = patchify(images, 8)
    assert out.shape == (2, 6, 192)
    for b in range(2):
        for i in range(2):
            for j in range(3):
                patch = images[b, :, 8 * i:8 * i + 8, 8 * j:8 * j + 8].permute(1, 2, 0).reshape(-1)  # (row, col, c)
                assert torch.equal(out[b, 3 * i + j], patch)
    target = PatchPixelTarget(patch_size=8).get_targets(dict(images=images))
    for b, n in ((0, 0), (1, 5)):
        raw = out[b, n]
        ref = (raw - raw.mean()) / (raw.var(unbiased=True) + 1e-6).sqrt()
        assert (target[b, n] - ref).abs().max() <= 1e-6
    with pytest.raises(ValueError, match='not divisible'):
        patchify(images, 5)


def test_pixel_loss_counts_masked_patches_only():
    g = torch.Generator().manual_seed(1)
    head = PixelRegressionHead(DIM, patch_size=2, in_channels=3)
    randomize_(head, seed=2)
    tokens = torch.randn(2, 16, DIM, generator=g)
    target = torch.randn(2, 16, 12, generator=g)
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[0, [1, 5]] = True
    mask[1, [0, 7, 15]] = True
    out = head.loss(tokens, target, mask)
    pred = head(tokens)
    by_hand = torch.stack([((pred[b, n] - target[b, n])**2).mean() for b, n in mask.nonzero().tolist()]).mean()
    assert (out['loss'] - by_hand).abs() <= 1e-6
    assert (out['loss_baseline'] - torch.stack([(target[b, n]**2).mean()
                                                for b, n in mask.nonzero().tolist()]).mean()).abs() <= 1e-6
    changed = target.clone()
    changed[~mask] += 5.0
    assert torch.equal(head.loss(tokens, changed, mask)['loss'], out['loss'])
    changed = target.clone()
    changed[0, 1] += 5.0
    assert (head.loss(tokens, changed, mask)['loss'] - out['loss']).abs() > 1e-3
    # no masked patch: NaN, never a silent 0 (MIMDataPreprocessor refuses such a batch first, test_mim.py)
    assert torch.isnan(head.loss(tokens, target, torch.zeros_like(mask))['loss'])


def test_pixel_arm_of_the_one_algorithm():
    torch.manual_seed(0)
    model = BEiTPretrain(**pixel_cfg())
    model.init_weights()
    inputs = make_inputs()
    out = model.loss(inputs)
    assert set(out) == {'loss', 'loss_baseline'}
    # the same computation step by step: masked BEiT tokens -> decoder, MSE vs normalized patches of the unmasked view
    tokens = model.backbone.forward_tokens(inputs['images'], inputs['mask'])[0][-1][:, 1:]
    target = PatchPixelTarget(8).get_targets(inputs)
    ref = model.head.loss(tokens, target, inputs['mask'].flatten(1))
    assert (out['loss'] - ref['loss']).abs() <= 1e-6
    out['loss'].backward()
    assert model.backbone.mask_token.grad.abs().sum() > 0
    # a head that does not fit its target generator is refused at build time
    cfg = pixel_cfg()
    cfg['head']['patch_size'] = 4
    with pytest.raises(ValueError, match='patch size'):
        BEiTPretrain(**cfg)
    cfg = pixel_cfg()
    cfg['head'] = tiny_cfg()['head']
    with pytest.raises(ValueError, match='no vocabulary'):
        BEiTPretrain(**cfg)


# ----------------------------------------------------------------------------------------- random masking
def test_random_masking_count_and_uniformity():
    gen = RandomMaskGenerator(input_size=8, mask_ratio=0.4, seed=0)
    blockwise = BEiTMaskGenerator(input_size=8, mask_ratio=0.4, min_num_patches=4)
    assert gen.num_masking_patches == blockwise.generator.num_masking_patches == 26  # same count rule
    masks = np.stack([gen(dict())['mask'] for _ in range(2000)])
    assert masks.shape == (2000, 8, 8) and masks.dtype == bool
    assert (masks.reshape(2000, -1).sum(1) == 26).all()
    freq = masks.mean(0)
    p = 26 / 64
    assert np.abs(freq - p).max() < 5 * np.sqrt(p * (1 - p) / 2000), freq
    # not blockwise: random masks have far more isolated masked patches than BEiT's blocks
    def isolated(m):
        padded = np.pad(m, 1)
        neighbours = padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:]
        return (m & ~neighbours).sum()
    np.random.seed(0)
    block_masks = [blockwise(dict())['mask'] for _ in range(200)]
    assert np.mean([isolated(m) for m in masks[:200]]) > 5 * max(np.mean([isolated(m) for m in block_masks]), 0.1)
    # seeded generators repeat; errors name the fix
    assert np.array_equal(RandomMaskGenerator(8, mask_ratio=0.4, seed=3)(dict())['mask'],
                          RandomMaskGenerator(8, mask_ratio=0.4, seed=3)(dict())['mask'])
    with pytest.raises(ValueError, match='give only one'):
        RandomMaskGenerator(8, num_masking_patches=10, mask_ratio=0.4)
    with pytest.raises(ValueError, match='must be in \\[1, 64\\]'):
        RandomMaskGenerator(8, num_masking_patches=65)


# ------------------------------------------------------------------------------------------- study configs
def flat(cfg) -> dict:
    """Config as {dotted key: value} with list items indexed."""
    out = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f'{prefix}.{k}' if prefix else k, v)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
            for i, v in enumerate(value):
                walk(f'{prefix}.{i}', v)
        else:
            out[prefix] = value

    walk('', cfg.to_dict())
    return out


def test_ablation_configs_differ_from_the_default_arm_only_in_their_part():
    tokens, pixels, random = (flat(Config.fromfile(p)) for p in (TOKENS, PIXELS, RANDOM))
    differ = lambda a, b: sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))  # noqa: E731
    assert all(k.startswith(('model.head.', 'model.target_generator.')) for k in differ(tokens, pixels))
    assert pixels['model.head.type'] == 'beit_mm.PixelRegressionHead'
    assert pixels['model.target_generator.type'] == 'beit_mm.PatchPixelTarget'
    mask_keys = ('train_dataloader.dataset.pipeline.4.', 'train_pipeline.4.')
    assert differ(tokens, random) and all(k.startswith(mask_keys) for k in differ(tokens, random))
    assert random['train_dataloader.dataset.pipeline.4.type'] == 'beit_mm.RandomMaskGenerator'
    assert tokens['model.backbone.init_mode'] == 'pretrain'
