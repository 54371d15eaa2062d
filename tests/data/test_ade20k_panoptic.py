"""ADE20K panoptic data: segments of a semantic + instance PNG pair by the official rule (tue-mps/eomt @ 7bd19dd
``datasets/ade20k_panoptic.py:153-181``, ``training/lightning_module.py:816-838``; exact), the dataset, its loader
and ``PanopticQualityMetric`` on the demo layout's files."""
import os
import os.path as osp
import re

import numpy as np
import pytest
import torch
from mmdet.datasets import ADE20KPanopticDataset as DetADE20KPanopticDataset
from mmdet.evaluation.functional import INSTANCE_OFFSET
from mmengine.registry import init_default_scope
from PIL import Image

from beit_mm.data.datasets.ade20k_panoptic import OFFICIAL_ORDER, STUFF, THINGS, panoptic_segments
from beit_mm.data.checks import DatasetCheckError
from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
from beit_mm.evaluation.panoptic_quality import PanopticQualityMetric

from ..conftest import load_tool

EOMT = 'tue-mps/eomt@7bd19dd'
# the official stuff_classes, configs/dinov2/ade20k/panoptic/eomt_large_640.yaml:24
OFFICIAL_STUFF = [0, 1, 2, 3, 4, 5, 6, 9, 11, 13, 16, 17, 21, 25, 26, 28, 29, 34, 40, 46, 48, 51, 52, 54, 59, 60, 61, 63,
                  68, 77, 79, 84, 91, 94, 96, 99, 100, 101, 105, 106, 109, 113, 114, 117, 122, 128, 131, 140, 141, 145]
# entries of the official INSTANCE_MAPPING (instance category - 1 -> ADE20K class), datasets/ade20k_panoptic.py:20,23,
# 28,68,119
INSTANCE_MAPPING = {0: 7, 3: 12, 8: 20, 48: 78, 99: 149}
NUM_TRAIN, NUM_VAL, SIZE = 4, 2, 32


def test_class_order_is_the_official_split_in_mmdets_order():
    assert list(STUFF) == OFFICIAL_STUFF
    assert len(THINGS) == 100 and all(THINGS[i] == c for i, c in INSTANCE_MAPPING.items())
    meta = DetADE20KPanopticDataset.METAINFO
    assert meta['classes'] == meta['thing_classes'] + meta['stuff_classes'] and len(meta['thing_classes']) == 100
    # mmseg's ADE20K names, in ADE20K's order, name the same classes as mmdet's list in its order
    from mmseg.datasets import ADE20KDataset
    names = ADE20KDataset.METAINFO['classes']
    for label, index in ((3, 12), (8, 20), (100, 0), (102, 2), (107, 9)):
        assert OFFICIAL_ORDER[label] == index and names[index].strip() in meta['classes'][label], (label, index)


def test_segments_follow_the_official_target_parser():
    semantic = np.zeros((4, 6), np.uint8)
    semantic[:2] = 3  # sky (stuff, index 2)
    semantic[2:, :3] = 13  # person (a thing class in the semantic PNG: not a segment of its own)
    semantic[2:, 3:] = 10  # grass (stuff, index 9)
    instance = np.zeros((4, 6, 3), np.uint8)
    instance[2:, :2] = (4, 1, 0)  # person, instance 1 (category 4 = INSTANCE_MAPPING[3] = 12)
    instance[1:3, 4:] = (9, 2, 0)  # car, instance 2, over sky and grass
    ids, segments = panoptic_segments(semantic, instance)
    assert segments == [dict(id=1, category=102, is_thing=False), dict(id=2, category=107, is_thing=False),
                        dict(id=3, category=3, is_thing=True), dict(id=4, category=8, is_thing=True)]
    want = np.array([[1, 1, 1, 1, 1, 1],
                     [1, 1, 1, 1, 4, 4],
                     [3, 3, 0, 2, 4, 4],
                     [3, 3, 0, 2, 2, 2]])
    np.testing.assert_array_equal(ids, want)  # instances cover stuff; the person pixels without an instance are void


def test_an_instance_of_two_categories_is_named():
    semantic = np.ones((2, 2), np.uint8)
    instance = np.zeros((2, 2, 3), np.uint8)
    instance[0] = (4, 1, 0)
    instance[1] = (9, 1, 0)
    with pytest.raises(DatasetCheckError, match=r'x\.png: instance 1 .* \[4, 9\].*exactly one category'):
        panoptic_segments(semantic, instance, 'x.png')


@pytest.fixture(scope='module')
def ade_root(tmp_path_factory) -> str:
    return make_demo_ade20k_panoptic(str(tmp_path_factory.mktemp('ade') / 'demo'), NUM_TRAIN, NUM_VAL, SIZE, seed=0)


def _dataset(root: str, split: str = 'validation', **kwargs):
    from beit_mm.registry import DATASETS
    init_default_scope('mmseg')  # the configs' scope
    return DATASETS.build(dict(
        type='beit_mm.ADE20KPanopticDataset', data_root=root,
        data_prefix=dict(img=f'images/{split}/', seg=f'annotations/{split}/', instance=f'annotations_instance/{split}/'),
        pipeline=[dict(type='mmdet.LoadImageFromFile'), dict(type='beit_mm.LoadADE20KPanopticAnnotations')], **kwargs))


def test_dataset_and_targets_on_the_demo_layout(ade_root):
    dataset = _dataset(ade_root)
    assert len(dataset) == NUM_VAL and dataset.metainfo['classes'] == DetADE20KPanopticDataset.METAINFO['classes']
    for i in range(NUM_VAL):
        sample = dataset[i]
        assert sample['img'].shape == (SIZE, SIZE + SIZE // 2, 3)
        labels = sample['gt_bboxes_labels'].tolist()
        assert labels and set(labels) <= {3, 8}  # person, car
        assert len(sample['gt_masks']) == len(labels) == len(sample['gt_bboxes'])
        seg = sample['gt_seg_map']
        for mask, label in zip(sample['gt_masks'].masks, labels):
            assert (seg[mask.astype(bool)] == label).all()
        assert 102 in np.unique(seg) and set(np.unique(seg).tolist()) <= {3, 8, 102, 106, 107, 255}


def test_a_missing_instance_png_is_named_before_training(ade_root, tmp_path):
    import shutil
    root = str(tmp_path / 'copy')
    shutil.copytree(ade_root, root)
    os.remove(osp.join(root, 'annotations_instance', 'validation', 'ADE_val_00000002.png'))
    with pytest.raises(DatasetCheckError, match=r'1 annotation PNG\(s\) missing.*annotations_instance/validation/'
                       r'ADE_val_00000002\.png'):
        _dataset(root)
    with pytest.raises(DatasetCheckError, match=r'folder\(s\) not found.*annotations_instance.tar'):
        _dataset(str(tmp_path / 'nowhere'))


def test_panoptic_quality_reads_the_ade20k_pair(ade_root):
    """A prediction equal to the ground truth scores PQ 100 over the classes present; one segment relabelled loses
    it (the metric reads the two PNGs, not a COCO JSON)."""
    dataset = _dataset(ade_root)
    metric = PanopticQualityMetric()
    metric.dataset_meta = dataset.metainfo
    for wrong in (False, True):
        samples = []
        for i in range(NUM_VAL):
            info = dataset[i]
            seg, masks, labels = info['gt_seg_map'], info['gt_masks'].masks, info['gt_bboxes_labels']
            pred = np.where(seg == 255, 150, seg).astype(np.int64)
            for k, (mask, label) in enumerate(zip(masks, labels), start=1):
                pred[mask.astype(bool)] = label + k * INSTANCE_OFFSET
            if wrong and i == 0:
                pred[seg == 102] = 103  # sky predicted as floor
            samples.append(dict(img_path=info['img_path'], seg_map_path=info['seg_map_path'],
                                instance_map_path=info['instance_map_path'], ori_shape=info['ori_shape'],
                                pred_panoptic_seg=dict(sem_seg=torch.from_numpy(pred)[None])))
        metric.results.clear()
        metric.process({}, samples)
        result = metric.compute_metrics(metric.results)
        assert (result['PQ'] < 100.0) if wrong else (result['PQ'] == pytest.approx(100.0)), result


def test_make_demo_data_writes_the_ade20k_panoptic_layout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr('sys.argv', ['make_demo_data.py', '--layout', 'ade20k-panoptic', '--num-train', '2',
                                     '--num-val', '1', '--size', '32'])
    load_tool('tools/make_demo_data.py').main()
    assert 'ADE20K panoptic layout' in capsys.readouterr().out
    root = tmp_path / 'data' / 'ade_panoptic_demo'
    for folder in ('images', 'annotations', 'annotations_instance'):
        assert sorted(os.listdir(root / folder / 'training')) == \
            [f'ADE_train_0000000{i}.{"jpg" if folder == "images" else "png"}' for i in (1, 2)]
    assert Image.open(root / 'annotations_instance' / 'validation' / 'ADE_val_00000001.png').mode == 'RGB'


@pytest.mark.parametrize('name,missing', [
    ('eomt_beit-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py',
     'instance folder nowhere/annotations_instance/training/'),
    ('eomt_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py',
     'annotation file nowhere/annotations/instances_train2017.json'),
])
def test_training_without_the_data_is_refused_naming_it(name, missing):
    """tools/train.py's check before the datasets are built (beit_mm.data.checks.check_split_folders) covers mmdet's
    layouts: the missing annotation file or folder named, not mmdet's bare FileNotFoundError."""
    from mmengine.config import Config
    from beit_mm.data.checks import check_split_folders
    from ..conftest import ROOT
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'demo', name))
    cfg.train_dataloader.dataset.data_root = 'nowhere/'
    with pytest.raises(DatasetCheckError, match=r'\[train_dataloader\] not found: .*' + re.escape(missing)):
        check_split_folders(cfg)
