"""The 'digits' demo style (beit_mm.data.demo.digits): scikit-learn's UCI handwritten digits, four per image, label =
digit + 1 on ink. References: the glyphs and their digits as scikit-learn returns them (``load_digits``), the ink rule
re-applied here to each quadrant, mmseg's ADE20KDataset reading the written root."""
import json
import os

import numpy as np
import pytest
from sklearn.datasets import load_digits

from beit_mm.data.demo import digits as D
from beit_mm.data.demo.ade20k import check_ade20k_labels, make_demo_ade20k
from beit_mm.data.demo.root import NotADemoRootError

from ..conftest import run_tool


def test_glyph_pools_are_sklearn_digits_and_disjoint():
    glyphs, labels = D.load_glyphs()
    ref = load_digits()
    assert glyphs.shape == (1797, 8, 8) and np.array_equal(labels, ref.target)
    assert np.allclose(glyphs * 16, ref.images)
    train, val = D.glyph_indices('training'), D.glyph_indices('validation')
    assert len(train) == 1500 and len(val) == 297 and not set(train) & set(val)
    # no validation glyph is pixel-identical to a training one either
    flat = glyphs.reshape(len(glyphs), -1)
    assert not {flat[i].tobytes() for i in train} & {flat[i].tobytes() for i in val}


@pytest.mark.parametrize('split', ['training', 'validation'])
def test_a_sample_holds_four_digits_labelled_by_their_ink(split, monkeypatch):
    """Real glyphs: one digit per quadrant. Stand-in glyphs whose digit tells their pool (training glyphs are 3s,
    validation glyphs 7s) and whose ink is a known square: the labels are digit + 1 exactly on the ink."""
    image, labels = D.make_digits_sample(64, np.random.default_rng(3), split)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8 and labels.shape == (64, 64)
    for qy in range(2):
        for qx in range(2):
            quadrant = labels[qy * 32:(qy + 1) * 32, qx * 32:(qx + 1) * 32]
            assert len(set(np.unique(quadrant)) - {0}) == 1 and quadrant.max() <= 10, (qy, qx)
    glyphs = np.zeros((1797, 8, 8), np.float32)
    glyphs[:, 2:6, 2:6] = 1.0  # ink: the middle 4x4 of every glyph
    digits = np.where(np.arange(1797) < D.TRAIN_GLYPHS, 3, 7)
    monkeypatch.setattr(D, 'load_glyphs', lambda: (glyphs, digits))
    _, labels = D.make_digits_sample(64, np.random.default_rng(3), split)
    digit = 3 if split == 'training' else 7
    assert set(np.unique(labels)) == {0, digit + 1}
    ink = (labels > 0).sum()
    assert 4 * (0.32 * 64 / 2 - 1)**2 <= ink <= 4 * (0.45 * 64 / 2 + 1)**2  # four squares of half the glyph side


def test_dark_ink_is_pen_on_paper():
    """ink='dark': light paper, dark ink: every label-0 pixel 3 px or more from ink is paper, the ink's median 60 levels
    or more below the paper's; the default ink is a random colour."""
    for seed in range(3):
        image, labels = D.make_digits_sample(64, np.random.default_rng(seed), 'validation', ink='dark')
        for qy in range(2):
            for qx in range(2):
                quadrant = labels[qy * 32:(qy + 1) * 32, qx * 32:(qx + 1) * 32]
                assert len(set(np.unique(quadrant)) - {0}) == 1, (seed, qy, qx)
        grey = image.astype(np.float32).mean(-1)
        ink = grey[labels > 0]
        far = np.ones_like(labels, bool)  # pixels at least 3 px from any ink: paper only
        for y, x in zip(*np.nonzero(labels)):
            far[max(0, y - 3):y + 4, max(0, x - 3):x + 4] = False
        paper = grey[far]
        assert np.percentile(paper, 1) > D.PAPER_RANGE[0] - 30 - 20, seed
        # ink alpha >= 0.5 over paper <= 255 + 30 with ink <= 80: at most 182 + noise; mostly far darker
        assert np.median(ink) < np.median(paper) - 60, seed
    colour = [D.make_digits_sample(64, np.random.default_rng(seed))[0] for seed in range(6)]
    assert min(im.reshape(-1, 3).mean(0).min() for im in colour) < D.PAPER_RANGE[0] - 30
    with pytest.raises(ValueError, match="unknown ink 'red'"):
        D.make_digits_sample(64, np.random.default_rng(0), ink='red')


def test_root_is_read_by_mmseg_and_is_deterministic(tmp_path):
    from mmengine.registry import init_default_scope
    from mmseg.datasets import ADE20KDataset
    init_default_scope('mmseg')
    a = make_demo_ade20k(str(tmp_path / 'a'), 6, 3, 64, seed=0, style='digits')
    b = make_demo_ade20k(str(tmp_path / 'b'), 6, 3, 64, seed=0, style='digits')
    c = make_demo_ade20k(str(tmp_path / 'c'), 6, 3, 64, seed=1, style='digits')
    name = os.path.join('images', 'training', 'ADE_train_00000001.jpg')
    assert open(os.path.join(a, name), 'rb').read() == open(os.path.join(b, name), 'rb').read()
    assert open(os.path.join(a, name), 'rb').read() != open(os.path.join(c, name), 'rb').read()
    counts = check_ade20k_labels(a)
    assert set(counts) <= set(range(11)) and len(counts) >= 6
    dataset = ADE20KDataset(data_root=a, data_prefix=dict(img_path='images/validation',
                                                          seg_map_path='annotations/validation'),
                            metainfo=dict(classes=ADE20KDataset.METAINFO['classes'][:10]), reduce_zero_label=True,
                            pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations',
                            reduce_zero_label=True)])
    assert len(dataset) == 3
    seg = dataset[0]['gt_seg_map']
    assert set(np.unique(seg)) <= set(range(10)) | {255} and 255 in seg
    with pytest.raises(NotADemoRootError):  # a folder the tool did not write is refused
        stranger = tmp_path / 'mine'
        stranger.mkdir()
        (stranger / 'notes.txt').write_text('mine')
        make_demo_ade20k(str(stranger), 2, 1, 64, style='digits')


@pytest.mark.parametrize('dataset', ['digits', 'digits-dark'])
def test_make_demo_data_writes_digits(tmp_path, dataset):
    root = tmp_path / dataset
    proc = run_tool(['tools/make_demo_data.py', '--dataset', dataset, '--root', str(root), '--num-train', '4',
                     '--num-val', '2'])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f'{root}: 4 train + 2 val images; label share 0: ')
    assert len(os.listdir(root / 'annotations' / 'validation')) == 2
    marker = json.loads((root / '.beit_mm_demo.json').read_text())
    assert marker['arguments']['style'] == dataset
