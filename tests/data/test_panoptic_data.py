"""COCO-layout demo data and panoptic quality (issue 50 item 2): ``tools/make_demo_data.py --layout coco``'s files
read by mmdet's ``CocoPanopticDataset`` (with ``beit_mm.LoadPanopticAnnotations``, no panopticapi) and
``CocoDataset``; ``beit_mm.PanopticQualityMetric`` against a hand-computed example."""
import os
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.registry import init_default_scope
from PIL import Image

from beit_mm.data.datasets.coco_panoptic import id2rgb, rgb2id
from beit_mm.data.demo.coco import COCO_DEMO_METAINFO, make_demo_coco
from beit_mm.evaluation.panoptic_quality import PanopticQualityMetric
from beit_mm.data.demo.root import NotADemoRootError

NUM_TRAIN, NUM_VAL, SIZE = 4, 2, 32


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), NUM_TRAIN, NUM_VAL, SIZE, seed=0)


def _build(cfg: dict):
    from mmdet.registry import DATASETS
    init_default_scope('mmdet')
    return DATASETS.build(cfg)


def test_demo_layout_reads_with_mmdet(coco_root):
    """Every file of COCO's layout is there; mmdet's panoptic and instance datasets read the same thing instances:
    the panoptic PNG's thing segments are the instance JSON's RLE masks, labelled things first then stuff."""
    for split, count in (('train', NUM_TRAIN), ('val', NUM_VAL)):
        assert len(os.listdir(osp.join(coco_root, f'{split}2017'))) == count
        assert len(os.listdir(osp.join(coco_root, 'annotations', f'panoptic_{split}2017'))) == count
    common = dict(data_root=coco_root, metainfo=COCO_DEMO_METAINFO, test_mode=True)
    panoptic = _build(dict(type='CocoPanopticDataset', ann_file='annotations/panoptic_val2017.json',
                           data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
                           pipeline=[dict(type='LoadImageFromFile'), dict(type='beit_mm.LoadPanopticAnnotations')],
                           **common))
    instances = _build(dict(type='CocoDataset', ann_file='annotations/instances_val2017.json',
                            data_prefix=dict(img='val2017/'),
                            pipeline=[dict(type='LoadImageFromFile'),
                                      dict(type='LoadAnnotations', with_bbox=True, with_mask=True)], **common))
    assert len(panoptic) == len(instances) == NUM_VAL
    for i in range(NUM_VAL):
        pan, ins = panoptic[i], instances[i]
        assert pan['img'].shape == (SIZE, SIZE + SIZE // 2, 3)
        np.testing.assert_array_equal(pan['gt_masks'].masks, ins['gt_masks'].masks)
        np.testing.assert_array_equal(pan['gt_bboxes_labels'], ins['gt_bboxes_labels'])
        assert set(pan['gt_bboxes_labels'].tolist()) <= {0, 1}  # person, car
        stuff = set(np.unique(pan['gt_seg_map']).tolist()) - {0, 1, 255}
        assert stuff and stuff <= {2, 3, 4}  # road, sky, grass
        assert 3 in stuff  # every image has sky


def test_demo_rewrites_nothing_and_refuses_foreign_roots(coco_root, tmp_path):
    stamps = {p: os.stat(osp.join(coco_root, 'train2017', p)).st_mtime_ns
              for p in os.listdir(osp.join(coco_root, 'train2017'))}
    make_demo_coco(coco_root, NUM_TRAIN, NUM_VAL, SIZE, seed=0)
    assert stamps == {p: os.stat(osp.join(coco_root, 'train2017', p)).st_mtime_ns for p in stamps}
    (tmp_path / 'real').mkdir()
    (tmp_path / 'real' / 'train2017.zip').write_bytes(b'x')
    with pytest.raises(NotADemoRootError, match='not a demo root'):
        make_demo_coco(str(tmp_path / 'real'), 1, 1, SIZE)
    assert os.listdir(tmp_path / 'real') == ['train2017.zip']


def test_segment_id_encoding_round_trips():
    ids = np.array([[0, 1, 255], [256, 65536, 256**3 - 1]])
    np.testing.assert_array_equal(rgb2id(id2rgb(ids)), ids)
    assert id2rgb(np.array([[1 + 2 * 256 + 3 * 65536]])).tolist() == [[[1, 2, 3]]]


# The hand-computed example: classes person (thing 0), car (thing 1), sky (stuff 2); a 4 x 6 image.
META = dict(classes=('person', 'car', 'sky'), thing_classes=('person', 'car'), stuff_classes=('sky', ))
GT_IDS = np.array([[7, 7, 7, 7, 7, 0],  # sky (segment 7), one void pixel (0) at the top right
                   [7, 7, 7, 7, 7, 7],
                   [5, 5, 5, 9, 9, 9],  # person (segment 5), car (segment 9)
                   [5, 5, 5, 9, 9, 9]])
GT_INFO = [dict(id=7, category=2, is_thing=False), dict(id=5, category=0, is_thing=True),
           dict(id=9, category=1, is_thing=True)]
PRED = np.array([[2, 2, 2, 2, 2, 2],  # sky everywhere above, also on the void pixel
                 [2, 2, 2, 2, 2, 2],
                 [2, 1000, 1000, 2000, 2000, 2000],  # person 1 misses one pixel (sky there); the car is called
                 [1000, 1000, 1000, 2000, 2000, 2000]])  # person 2
# By hand: sky: pred 13 px, 1 of them on void, GT 11 px, intersection 11 -> IoU 11 / (13 - 1 + 11 - 11) = 11/12:
# TP, SQ 11/12, RQ 1. person: pred 1 has 5 px, all inside GT 5 (6 px) -> IoU 5/6 TP; pred 2 (the car) is a person FP
# -> SQ 5/6, RQ 1 / (1 + 0.5) = 2/3. car: GT 9 unmatched -> FN, SQ 0, RQ 0, PQ 0.
EXPECTED = dict(PQ=(5 / 6 * 2 / 3 + 0 + 11 / 12) / 3, SQ=(5 / 6 + 0 + 11 / 12) / 3, RQ=(2 / 3 + 0 + 1) / 3,
                PQ_th=(5 / 6 * 2 / 3) / 2, SQ_th=(5 / 6) / 2, RQ_th=(2 / 3) / 2, PQ_st=11 / 12, SQ_st=11 / 12,
                RQ_st=1.0)


def _sample(tmp_path, pred: np.ndarray, gt_ids: np.ndarray = GT_IDS, info=GT_INFO) -> dict:
    path = str(tmp_path / 'gt.png')
    Image.fromarray(id2rgb(gt_ids)).save(path)
    return dict(img_path=str(tmp_path / 'gt.jpg'), seg_map_path=path, segments_info=info,
                pred_panoptic_seg=dict(sem_seg=torch.as_tensor(pred)[None]))


def _evaluate(samples: list[dict], classwise: bool = False) -> dict:
    metric = PanopticQualityMetric(classwise=classwise)
    metric.dataset_meta = META
    metric.process({}, samples)
    return metric.evaluate(len(samples))


def test_panoptic_quality_matches_hand_computed_example(tmp_path):
    got = _evaluate([_sample(tmp_path, PRED)], classwise=True)
    assert set(got) == {f'coco_panoptic/{k}' for k in EXPECTED}  # mmdet CocoPanopticMetric's names
    for key, value in EXPECTED.items():
        assert got[f'coco_panoptic/{key}'] == pytest.approx(100 * value, abs=1e-9), key


def test_panoptic_quality_perfect_and_void_predictions(tmp_path):
    gt_panoptic = np.select([GT_IDS == 7, GT_IDS == 5, GT_IDS == 9], [2, 1000, 1001], 3)  # 3 = VOID (num classes)
    perfect = _evaluate([_sample(tmp_path, gt_panoptic)])
    assert all(v == pytest.approx(100.0) for v in perfect.values())
    nothing = _evaluate([_sample(tmp_path, np.full_like(GT_IDS, 3))])  # all void: every GT segment a FN
    assert all(v == 0.0 for v in nothing.values())


def test_predicted_void_never_excuses_a_false_negative(tmp_path):
    """The car left void in the prediction is a car FN (panopticapi's rule; torchmetrics' own void handling would drop
    it and report PQ_th = 5/6 over the person alone)."""
    pred = np.where(PRED == 2000, 3, PRED)  # 3 = VOID (number of classes)
    got = _evaluate([_sample(tmp_path, pred)])
    assert got['coco_panoptic/PQ_th'] == pytest.approx(100 * (5 / 6) / 2, abs=1e-5)  # person 5/6 x RQ 1, car 0
    assert got['coco_panoptic/RQ_th'] == pytest.approx(100 * 1 / 2, abs=1e-5)


def test_panoptic_quality_names_missing_inputs(tmp_path):
    sample = _sample(tmp_path, PRED)
    del sample['segments_info']
    with pytest.raises(KeyError, match="add 'seg_map_path' and 'segments_info' to the test pipeline"):
        _evaluate([sample])
    metric = PanopticQualityMetric()
    metric.dataset_meta = dict(classes=('a', ))
    with pytest.raises(ValueError, match='thing_classes and stuff_classes'):
        metric.process({}, [_sample(tmp_path, PRED)])


def test_make_demo_data_tool_writes_the_coco_layout(tmp_path, monkeypatch, capsys):
    from ..conftest import load_tool
    tool = load_tool('tools/make_demo_data.py')
    root = str(tmp_path / 'coco_demo')
    monkeypatch.setattr('sys.argv', ['make_demo_data.py', '--layout', 'coco', '--root', root, '--num-train', '2',
                                     '--num-val', '1', '--size', '32'])
    tool.main()
    assert 'COCO panoptic + instance layout, things person, car, stuff road' in capsys.readouterr().out
    assert sorted(os.listdir(osp.join(root, 'annotations'))) == [
        'instances_train2017.json', 'instances_val2017.json', 'panoptic_train2017', 'panoptic_train2017.json',
        'panoptic_val2017', 'panoptic_val2017.json']
    monkeypatch.setattr('sys.argv', ['make_demo_data.py', '--layout', 'coco', '--dataset', 'shapes'])
    with pytest.raises(SystemExit):
        tool.main()
    assert '--layout coco writes a labeled set of its own' in capsys.readouterr().err
