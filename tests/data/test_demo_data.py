"""Demo ADE20K data: layout, counts, label convention (ADEChallengeData2016: uint8, 0 = other, 1..150 = classes),
learnability, idempotency, and the label validator on good and bad masks (REFERENCE.md section 5 and 6 item 7)."""
import glob
import os
import os.path as osp

import numpy as np
import pytest
from PIL import Image

from beit_mm.data.demo.ade20k import DEMO_CLASSES, check_ade20k_labels, make_demo_ade20k

NUM_TRAIN, NUM_VAL, SIZE = 12, 4, 64


@pytest.fixture(scope='module')
def demo_root(tmp_path_factory) -> str:
    return make_demo_ade20k(str(tmp_path_factory.mktemp('ade') / 'ade_demo'), NUM_TRAIN, NUM_VAL, SIZE, seed=0)


def _masks(root: str, split: str = 'training') -> list:
    return [np.asarray(Image.open(p)) for p in sorted(glob.glob(osp.join(root, 'annotations', split, '*.png')))]


def test_layout_and_counts(demo_root):
    for split, prefix, count in (('training', 'train', NUM_TRAIN), ('validation', 'val', NUM_VAL)):
        images = sorted(os.listdir(osp.join(demo_root, 'images', split)))
        masks = sorted(os.listdir(osp.join(demo_root, 'annotations', split)))
        assert images == [f'ADE_{prefix}_{i:08d}.jpg' for i in range(1, count + 1)]
        assert masks == [f'ADE_{prefix}_{i:08d}.png' for i in range(1, count + 1)]
        image = Image.open(osp.join(demo_root, 'images', split, images[0]))
        mask = Image.open(osp.join(demo_root, 'annotations', split, masks[0]))
        assert image.mode == 'RGB' and image.size == (SIZE, SIZE)
        assert mask.mode == 'L' and mask.size == (SIZE, SIZE)


def test_label_values_follow_raw_ade20k(demo_root):
    values = set(np.unique(np.stack(_masks(demo_root))).tolist())
    assert values <= {0} | set(DEMO_CLASSES)
    assert set(DEMO_CLASSES) <= values, 'every demo class should occur in 12 training images'
    assert all(1 <= c <= 150 for c in DEMO_CLASSES)
    counts = check_ade20k_labels(demo_root)
    assert sum(counts.values()) == (NUM_TRAIN + NUM_VAL) * SIZE * SIZE


def test_classes_are_learnable_from_colour(demo_root):
    """A nearest-class-mean classifier on 5x5 box-filtered colours, fitted on the training split, must label > 85% of
    the validation pixels of the demo classes correctly: the classes are separable by appearance."""

    def blurred(split: str) -> np.ndarray:
        out = []
        for p in sorted(glob.glob(osp.join(demo_root, 'images', split, '*.jpg'))):
            img = np.asarray(Image.open(p), np.float64)
            padded = np.pad(img, ((2, 2), (2, 2), (0, 0)), mode='edge')
            out.append(sum(padded[dy:dy + SIZE, dx:dx + SIZE] for dy in range(5) for dx in range(5)) / 25)
        return np.stack(out)

    x_train, y_train = blurred('training').reshape(-1, 3), np.stack(_masks(demo_root)).reshape(-1)
    x_val, y_val = blurred('validation').reshape(-1, 3), np.stack(_masks(demo_root, 'validation')).reshape(-1)
    classes = sorted(DEMO_CLASSES)
    means = np.stack([x_train[y_train == c].mean(0) for c in classes])
    keep = y_val != 0
    pred = np.asarray(classes)[np.argmin(((x_val[keep, None] - means[None])**2).sum(-1), 1)]
    assert (pred == y_val[keep]).mean() > 0.85


def test_deterministic_and_idempotent(demo_root, tmp_path):
    other = make_demo_ade20k(str(tmp_path / 'again'), NUM_TRAIN, NUM_VAL, SIZE, seed=0)
    for a, b in zip(_masks(demo_root), _masks(other)):
        np.testing.assert_array_equal(a, b)
    path = osp.join(other, 'annotations', 'training', 'ADE_train_00000001.png')
    before = os.stat(path).st_mtime_ns
    make_demo_ade20k(other, NUM_TRAIN, NUM_VAL, SIZE, seed=0)
    assert os.stat(path).st_mtime_ns == before, 'a complete dataset must be left alone'
    make_demo_ade20k(other, NUM_TRAIN + 2, NUM_VAL, SIZE, seed=0)  # a different count regenerates the split
    assert len(os.listdir(osp.join(other, 'annotations', 'training'))) == NUM_TRAIN + 2
    assert len(os.listdir(osp.join(other, 'images', 'training'))) == NUM_TRAIN + 2


def _write_masks(root, masks) -> str:
    ann = osp.join(root, 'annotations', 'training')
    os.makedirs(ann, exist_ok=True)
    for i, m in enumerate(masks):
        Image.fromarray(m).save(osp.join(ann, f'ADE_train_{i + 1:08d}.png'))
    return str(root)


def test_validator_rejects_binary_masks(tmp_path):
    mask = np.zeros((8, 8), np.uint8)
    mask[2:5, 2:5] = 255
    with pytest.raises(ValueError, match='binary mask'):
        check_ade20k_labels(_write_masks(tmp_path, [mask]))


def test_validator_rejects_already_reduced_masks(demo_root, tmp_path):
    raw = next(m for m in _masks(demo_root) if (m == 0).any())  # a mask with "other" pixels
    reduced = np.where(raw == 0, 255, raw - 1).astype(np.uint8)  # what reduce_zero_label does
    with pytest.raises(ValueError, match='already reduced'):
        check_ade20k_labels(_write_masks(tmp_path, [raw, reduced]))


def test_validator_rejects_out_of_range_and_colour_masks(tmp_path):
    mask = np.full((8, 8), 3, np.uint8)
    mask[0, 0] = 200
    with pytest.raises(ValueError, match=r'outside 0\.\.150'):
        check_ade20k_labels(_write_masks(tmp_path / 'range', [mask]))
    colour = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match='single-channel'):
        check_ade20k_labels(_write_masks(tmp_path / 'rgb', [colour]))
    with pytest.raises(FileNotFoundError, match='ADEChallengeData2016'):
        check_ade20k_labels(str(tmp_path / 'empty'))
