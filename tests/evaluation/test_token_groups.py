"""What a tokenizer's codes group (``beit_mm.evaluation.token_groups``) and ``tools/visualize.py token-maps``: NMI and
purity on constructed cases whose values follow from the definitions, purity against an explicit per-code count."""
import os
import os.path as osp

import numpy as np
import torch
from mmengine.config import Config
from PIL import Image

from beit_mm.apis import build_from_config
from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.evaluation.token_groups import nmi, patch_colours, purity, token_group_stats

from ..conftest import ROOT, run_tool


def test_nmi_and_purity_follow_their_definitions():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, 4000)
    assert abs(nmi(labels, labels) - 1) < 1e-9 and abs(nmi(labels * 7 + 3, labels) - 1) < 1e-9  # names are free
    assert nmi(rng.integers(0, 64, 4000), labels) < 0.02
    assert nmi(np.zeros(10, int), labels[:10]) == 0.0
    ids = rng.integers(0, 20, 4000)
    expected = sum(np.bincount(labels[ids == c]).max() for c in np.unique(ids)) / len(ids)
    assert abs(purity(ids, labels) - expected) < 1e-12 and purity(labels, labels) == 1.0


def test_stats_see_class_codes_and_colour_codes():
    """Ids equal to the patch classes score NMI(id; class) 1 and purity 100; ids equal to the colour bins score
    NMI(id; colour) 1; the shuffled baselines stay far below."""
    g = torch.Generator().manual_seed(0)
    classes = torch.randint(0, 4, (200, 4, 4), generator=g)
    labels = classes.repeat_interleave(8, 1).repeat_interleave(8, 2)  # (200, 32, 32), uniform 8 px patches
    colours = torch.randint(0, 256, (200, 3, 4, 4), generator=g).float()
    images = colours.repeat_interleave(8, 2).repeat_interleave(8, 3)
    by_class = token_group_stats(classes.flatten(1), labels, images, num_classes=4)
    assert abs(by_class['nmi_class'] - 1) < 1e-9 and by_class['purity'] == 100.0
    assert by_class['nmi_class_shuffled'] < 0.01 and by_class['num_patches'] == 3200
    by_position = token_group_stats(torch.arange(16).repeat(200, 1), labels, images, num_classes=4)
    assert abs(by_position['nmi_position'] - 1) < 1e-9 and by_position['nmi_position_shuffled'] < 0.03
    by_colour = token_group_stats(patch_colours(images, (4, 4)).flatten(1), labels, images, num_classes=4)
    assert abs(by_colour['nmi_colour'] - 1) < 1e-9 and by_colour['nmi_colour_shuffled'] < 0.25
    # (64 x 64 bins over 3200 patches: the finite-sample bias of the shuffled NMI is ~0.17, why it is the baseline)
    assert by_colour['nmi_class'] < by_colour['nmi_colour_shuffled']  # random colours say nothing about the classes


def test_token_maps_tool(tmp_path):
    """tools/visualize.py token-maps with a tiny dVAE and a tiny VQ-KD (random weights, random unit codes) on a
    labeled shapes set: the table for both tokenizers and the picture."""
    root = make_demo_ade20k(str(tmp_path / 'shapes'), 2, 4, 64, seed=0, style='shapes')
    torch.manual_seed(0)
    dvae_cfg = osp.join(ROOT, 'configs/studies/dvae-tiny-v256_1xb32-1k_shapes-64px.py')
    vqkd_cfg = osp.join(ROOT, 'configs/studies/vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py')
    dvae, vqkd = build_from_config(Config.fromfile(dvae_cfg)), build_from_config(Config.fromfile(vqkd_cfg))
    with torch.no_grad():
        codes = vqkd.quantize.embedding
        codes.weight.copy_(torch.nn.functional.normalize(torch.randn(codes.weight.shape), dim=-1))
        codes.initted.fill_(1)
    torch.save(dict(state_dict=dvae.state_dict()), tmp_path / 'dvae.pth')
    torch.save(dict(state_dict=vqkd.state_dict()), tmp_path / 'vqkd.pth')
    out = tmp_path / 'maps.png'
    proc = run_tool(['tools/visualize.py', 'token-maps', '--dvae', dvae_cfg, str(tmp_path / 'dvae.pth'), '--vqkd',
                     vqkd_cfg, str(tmp_path / 'vqkd.pth'), '--data-root', root, '--num-classes', '7', '--show', '2',
                     '--out', str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'What the codes group on 4 validation images' in proc.stdout
    assert '| dVAE | ' in proc.stdout and '| VQ-KD | ' in proc.stdout and ' of 256 | ' in proc.stdout
    with Image.open(out) as im:
        assert im.mode == 'RGB' and im.size[1] > 2 * 100  # two rows
