"""The generated ImageNet-layout demo set (beit_mm.data.demo.imagenet): layout, class order as mmpretrain reads it
(folder layout and annotation-file layout agree, label = sorted-wnid index), determinism, and that its classes are
learnable (a nearest-centroid classifier on mean colour separates the validation images)."""
import glob
import hashlib
import os

import numpy as np
import pytest
from PIL import Image

from beit_mm.data.demo.imagenet import demo_class_style, demo_wnids, make_demo_imagenet

NUM_CLASSES, TRAIN, VAL, SIZE = 5, 8, 4, 32


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return make_demo_imagenet(str(tmp_path_factory.mktemp('in') / 'imagenet'), NUM_CLASSES, TRAIN, VAL, SIZE, seed=0)


def _digest(root: str) -> str:
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(root, '*', '*', '*.JPEG'))):
        h.update(os.path.relpath(path, root).encode())
        with open(path, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()


def test_layout_is_imagenet_folder_layout(root):
    wnids = demo_wnids(NUM_CLASSES)
    assert wnids[0] == 'n01440764' and wnids == sorted(wnids) and len(set(wnids)) == NUM_CLASSES
    for split, per_class in (('train', TRAIN), ('val', VAL)):
        assert sorted(os.listdir(os.path.join(root, split))) == wnids
        for wnid in wnids:
            files = os.listdir(os.path.join(root, split, wnid))
            assert len(files) == per_class and all(f.endswith('.JPEG') for f in files)
    assert sorted(os.listdir(os.path.join(root, 'val', wnids[1])))[0] == f'ILSVRC2012_val_{VAL + 1:08d}.JPEG'
    image = Image.open(glob.glob(os.path.join(root, 'train', wnids[0], '*.JPEG'))[0])
    assert image.mode == 'RGB' and image.size == (SIZE, SIZE)


def test_deterministic_and_regenerates_on_change(tmp_path):
    a = make_demo_imagenet(str(tmp_path / 'a'), 3, 2, 1, SIZE, seed=3)
    b = make_demo_imagenet(str(tmp_path / 'b'), 3, 2, 1, SIZE, seed=3)
    assert _digest(a) == _digest(b)
    first = os.path.join(a, 'train', demo_wnids(3)[0], f'{demo_wnids(3)[0]}_0.JPEG')
    mtime = os.stat(first).st_mtime_ns
    make_demo_imagenet(a, 3, 2, 1, SIZE, seed=3)  # complete: nothing rewritten
    assert os.stat(first).st_mtime_ns == mtime
    make_demo_imagenet(a, 2, 2, 1, SIZE, seed=3)  # fewer classes: no stale class folder left to shift labels
    assert sorted(os.listdir(os.path.join(a, 'train'))) == demo_wnids(2)
    assert sorted(os.listdir(os.path.join(a, 'val'))) == demo_wnids(2)


def test_mmpretrain_reads_labels_in_sorted_wnid_order_in_both_layouts(tmp_path):
    """Folder layout (CustomDataset scan) and annotation-file layout (ImageNet + meta/{split}.txt) give the same
    (file, label) pairs, and label k is the k-th sorted wnid (REFERENCE.md section 6 item 14)."""
    from mmpretrain.datasets import CustomDataset, ImageNet

    root = make_demo_imagenet(str(tmp_path / 'in'), 4, 3, 2, SIZE, seed=1, ann_files=True)
    wnids = demo_wnids(4)
    for split in ('train', 'val'):
        folder = CustomDataset(data_root=root, data_prefix=split, lazy_init=False)
        ann = ImageNet(data_root=root, split=split)  # picks meta/<split>.txt because it exists
        assert ann.ann_file.endswith(os.path.join('meta', f'{split}.txt'))
        assert folder.metainfo['classes'] == tuple(wnids)
        pairs_folder = sorted((d['img_path'], d['gt_label']) for d in folder.load_data_list())
        pairs_ann = sorted((d['img_path'], d['gt_label']) for d in ann.load_data_list())
        assert pairs_folder == pairs_ann and len(pairs_folder) == 4 * (3 if split == 'train' else 2)
        for path, label in pairs_folder:
            assert os.path.basename(os.path.dirname(path)) == wnids[label]
    make_demo_imagenet(root, 4, 3, 2, SIZE, seed=1)  # ann_files=False removes stale annotation files
    assert not glob.glob(os.path.join(root, 'meta', '*.txt'))


def _colour_feature(path: str) -> np.ndarray:
    """Mean RGB of the saturated (foreground) pixels."""
    rgb = np.asarray(Image.open(path), np.float32)
    saturation = rgb.max(-1) - rgb.min(-1)
    return rgb[saturation > 60].mean(0)


def test_classes_are_learnable(root):
    """Nearest class centroid of the foreground colour, fitted on train, classifies >= 95% of val correctly (chance:
    20%); the class colours are those of demo_class_style."""
    wnids = demo_wnids(NUM_CLASSES)
    centroids, colours = [], []
    for k, wnid in enumerate(wnids):
        feats = [_colour_feature(p) for p in glob.glob(os.path.join(root, 'train', wnid, '*.JPEG'))]
        centroids.append(np.mean(feats, 0))
        colours.append(np.asarray(demo_class_style(k, NUM_CLASSES)[2], np.float32))
    centroids = np.stack(centroids)
    assert np.abs(centroids - np.stack(colours)).max() < 40  # the drawn colour is the class colour
    correct = total = 0
    for k, wnid in enumerate(wnids):
        for path in glob.glob(os.path.join(root, 'val', wnid, '*.JPEG')):
            pred = int(np.argmin(((centroids - _colour_feature(path))**2).sum(-1)))
            correct += pred == k
            total += 1
    assert correct / total >= 0.95
    assert len({demo_class_style(k, NUM_CLASSES)[:2] for k in range(NUM_CLASSES)}) == NUM_CLASSES  # distinct shapes


def test_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match='num_classes'):
        make_demo_imagenet(str(tmp_path), num_classes=0)
