"""``PanopticQualityMetric`` against cocodataset/panopticapi @ 7bb4655 (``pq_compute_multi_core`` then
``PQStat.pq_average``) on crafted COCO-format cases and one ADE20K panoptic case. panopticapi runs in a subprocess
from ``$BEIT_MM_PANOPTICAPI``, ``../shared/panopticapi`` or ``/tmp/panopticapi`` (else that test skips);
:data:`EXPECTED` records the numbers it printed, checked everywhere."""
from __future__ import annotations

import json
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from beit_mm.data.datasets.ade20k_panoptic import ADE20KPanopticDataset, STUFF, THINGS
from beit_mm.evaluation.panoptic_quality import PanopticQualityMetric

from .panoptic_cases import CASES, META, ground_truth, mmdet_sample, prediction, write_coco

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
PANOPTICAPI_COMMIT = '7bb4655548f98f3fedc07bf37e9040a992b054b0'
NAMES = ('PQ', 'SQ', 'RQ', 'PQ_th', 'SQ_th', 'RQ_th', 'PQ_st', 'SQ_st', 'RQ_st')

# panopticapi @ 7bb4655 on these cases, in percent (test_metric_equals_panopticapi_run prints them afresh); None: the
# split has no counted category (panopticapi's pq_average divides by zero).
EXPECTED = {  # PQ, SQ, RQ, PQ_th, SQ_th, RQ_th, PQ_st, SQ_st, RQ_st
    'crowd_same_class': dict(zip(NAMES, (94.44444444, 94.44444444, 100,
                                         100, 100, 100,
                                         91.66666667, 91.66666667, 100))),
    'crowd_other_class': dict(zip(NAMES, (75, 75, 75,
                                          50, 50, 50,
                                          100, 100, 100))),
    'matched_over_crowd': dict(zip(NAMES, (83.33333333, 83.33333333, 100,
                                           66.66666667, 66.66666667, 100,
                                           91.66666667, 91.66666667, 100))),
    'two_crowds_one_class': dict(zip(NAMES, (83.33333333, 100, 83.33333333,
                                             66.66666667, 100, 66.66666667,
                                             100, 100, 100))),
    'void_around_half': dict(zip(NAMES, (51.66666667, 72.5, 54.16666667,
                                         58.33333333, 100, 58.33333333,
                                         45, 45, 50))),
    'iou_at_half': dict(zip(NAMES, (9.52380952, 28.57142857, 16.66666667,
                                    19.04761905, 57.14285714, 33.33333333,
                                    0, 0, 0))),
    'no_stuff': dict(zip(NAMES, (100, 100, 100,
                                 100, 100, 100,
                                 None, None, None))),
    'all': dict(zip(NAMES, (67.88776743, 94.91071429, 71.55797101,
                            56.4699793, 95.23809524, 59.7826087,
                            79.30555556, 94.58333333, 83.33333333))),
    'ade20k': dict(zip(NAMES, (81.57051282, 81.57051282, 100,
                               75, 75, 100,
                               88.14102564, 88.14102564, 100))),
}


def panopticapi_root() -> str | None:
    """The panopticapi checkout (module docstring), or None."""
    for root in (os.environ.get('BEIT_MM_PANOPTICAPI'), osp.join(ROOT, '..', 'shared', 'panopticapi'),
                 '/tmp/panopticapi'):
        if root and osp.isfile(osp.join(root, 'panopticapi', 'evaluation.py')):
            return root
    return None


# pq_compute (evaluation.py:184-236) without its printing, so that a split with no counted category, where pq_average
# divides by zero, reads as None instead of ending the evaluation.
DRIVER = r'''
import json, sys
from panopticapi.evaluation import pq_compute_multi_core
results = {}
for name, gt_json, pred_json in json.load(open(sys.argv[1])):
    gt, pred = json.load(open(gt_json)), json.load(open(pred_json))
    categories = {c['id']: c for c in gt['categories']}
    preds = {a['image_id']: a for a in pred['annotations']}
    pairs = [(a, preds[a['image_id']]) for a in gt['annotations']]
    stat = pq_compute_multi_core(pairs, gt_json[:-5], pred_json[:-5], categories)
    results[name] = {}
    for split, suffix, isthing in (('All', '', None), ('Things', '_th', True), ('Stuff', '_st', False)):
        try:
            average = stat.pq_average(categories, isthing)[0]
        except ZeroDivisionError:
            average = dict(pq=None, sq=None, rq=None)
        for key in ('pq', 'sq', 'rq'):
            results[name][key.upper() + suffix] = None if average[key] is None else 100 * float(average[key])
json.dump(results, open(sys.argv[2], 'w'))
'''


def run_panopticapi(root: str, evaluations: list[tuple[str, str, str]], tmp: str) -> dict[str, dict]:
    """panopticapi's numbers (mmdet's names, percent) for each (name, ground-truth JSON, prediction JSON)."""
    with open(osp.join(tmp, 'evaluations.json'), 'w') as f:
        json.dump(evaluations, f)
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run([sys.executable, '-c', DRIVER, osp.join(tmp, 'evaluations.json'),
                           osp.join(tmp, 'results.json')], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(osp.join(tmp, 'results.json')) as f:
        return json.load(f)


# The ADE20K case, drawn three ways: the semantic PNG (w wall, f floor, c ceiling: stuff; a, b: thing classes; '.' 0
# "other"), the instance PNG ('1', '2' instances of thing category 1, '3' of category 2) and the panoptic segmentation
# they make (stuff per semantic class, instances over it: the ceiling wholly under instance 2 vanishes; thing pixels of
# no instance are void). The prediction (mmdet's labels: things 0..99, stuff 100..149).
ADE_STUFF = {'w': 0, 'f': 2, 'c': 5}  # ranks in STUFF: label 100 + rank
ADE_SEMANTIC = ['wwwwwwww',
                'wwaaww..',
                'ccaaffbb',
                'ffffffbb',
                'ffaa..ff']
ADE_INSTANCE = ['........',
                '..11....',
                '2211..33',
                '......33',
                '........']
ADE_PANOPTIC = ['wwwwwwww',
                'wwAAww..',
                'BBAAffCC',
                'ffffffCC',
                'ff....ff']
ADE_PANOPTIC_SEGMENTS = {'w': (1, 100 + ADE_STUFF['w']), 'f': (2, 100 + ADE_STUFF['f']), 'A': (3, 0), 'B': (4, 0),
                         'C': (5, 1)}
ADE_PRED = ['wwwwwwww',
            'wwAAAw..',
            'BBAAfffk',
            'fffffkkk',
            'ffffffff']
ADE_PRED_VALUES = {'.': 150, 'w': 100 + ADE_STUFF['w'], 'f': 100 + ADE_STUFF['f'], 'A': 1000, 'B': 2000, 'k': 3001}


def ade20k_case(tmp: str) -> tuple[dict, tuple[np.ndarray, list[dict], np.ndarray]]:
    """The ADE20K case: mmdet's data sample over its two PNGs, and its COCO form (segment ids, segments_info,
    prediction)."""
    semantic_values = dict({k: STUFF[r] + 1 for k, r in ADE_STUFF.items()}, a=THINGS[0] + 1, b=THINGS[1] + 1)
    semantic = np.array([[semantic_values.get(c, 0) for c in row] for row in ADE_SEMANTIC], np.uint8)
    instance_values = {'1': (1, 1), '2': (1, 2), '3': (2, 3)}
    instance = np.array([[(*instance_values.get(c, (0, 0)), 0) for c in row] for row in ADE_INSTANCE], np.uint8)
    Image.fromarray(semantic).save(osp.join(tmp, 'ade_semantic.png'))
    Image.fromarray(instance).save(osp.join(tmp, 'ade_instance.png'))
    pred = np.array([[ADE_PRED_VALUES[c] for c in row] for row in ADE_PRED], np.int64)
    sample = dict(img_path=osp.join(tmp, 'ade.jpg'), seg_map_path=osp.join(tmp, 'ade_semantic.png'),
                  instance_map_path=osp.join(tmp, 'ade_instance.png'), ori_shape=semantic.shape,
                  pred_panoptic_seg=dict(sem_seg=torch.from_numpy(pred)[None]))
    ids = np.array([[ADE_PANOPTIC_SEGMENTS[c][0] if c != '.' else 0 for c in row] for row in ADE_PANOPTIC])
    info = [dict(id=i, category_id=label + 1, iscrowd=0, area=int((ids == i).sum()))
            for i, label in ADE_PANOPTIC_SEGMENTS.values()]
    return sample, (ids, info, pred)


def evaluate(samples: list[dict], meta: dict) -> dict[str, float | None]:
    metric = PanopticQualityMetric()
    metric.dataset_meta = meta
    metric.process({}, samples)
    return {k.split('/')[1]: v for k, v in metric.evaluate(len(samples)).items()}


def metric_numbers(tmp: str) -> dict[str, dict]:
    """The metric's numbers for every case, all COCO cases together ('all') and the ADE20K case."""
    samples = {name: mmdet_sample(name, osp.join(tmp, f'{name}.png')) for name in CASES}
    got = {name: evaluate([sample], META) for name, sample in samples.items()}
    got['all'] = evaluate(list(samples.values()), META)
    got['ade20k'] = evaluate([ade20k_case(tmp)[0]], ADE20KPanopticDataset.METAINFO)
    return got


def assert_same(got: dict, expected: dict, what: str) -> None:
    for name in expected:
        for key in NAMES:
            if expected[name][key] is None:
                assert got[name][key] is None, f'{name} {key}: {got[name][key]}, {what}: not available'
            else:
                assert got[name][key] == pytest.approx(expected[name][key], abs=1e-4), f'{name} {key} vs {what}'


@pytest.fixture(scope='module')
def metric_results(tmp_path_factory) -> dict[str, dict]:
    return metric_numbers(str(tmp_path_factory.mktemp('pq')))


@pytest.mark.parametrize('name', [*CASES, 'all', 'ade20k'])
def test_metric_equals_panopticapi_recorded(name, metric_results):
    """Each case's nine numbers equal panopticapi's (recorded in :data:`EXPECTED`) to 1e-4 PQ points."""
    assert_same({name: metric_results[name]}, {name: EXPECTED[name]}, f'panopticapi @ {PANOPTICAPI_COMMIT[:7]}')


def test_metric_equals_panopticapi_run(tmp_path):
    """panopticapi run now (a subprocess, the checkout of :data:`PANOPTICAPI_COMMIT`) on the COCO form of every case
    gives :data:`EXPECTED` and the metric's numbers."""
    root = panopticapi_root()
    if root is None:
        pytest.skip(f'no panopticapi checkout (cocodataset/panopticapi @ {PANOPTICAPI_COMMIT}): set '
                    'BEIT_MM_PANOPTICAPI or unpack it at ../shared/panopticapi or /tmp/panopticapi; the recorded '
                    'numbers still run in test_metric_equals_panopticapi_recorded')
    tmp = str(tmp_path)
    coco = {name: (*ground_truth(name), prediction(name)) for name in CASES}
    evaluations = [(name, *write_coco(osp.join(tmp, name), {name: coco[name]}, list(META['classes']), 2))
                   for name in CASES]
    evaluations.append(('all', *write_coco(osp.join(tmp, 'all'), coco, list(META['classes']), 2)))
    ade = ADE20KPanopticDataset.METAINFO
    evaluations.append(('ade20k', *write_coco(osp.join(tmp, 'ade20k'), {'ade20k': ade20k_case(tmp)[1]},
                                              list(ade['classes']), len(ade['thing_classes']))))
    reference = run_panopticapi(root, evaluations, tmp)
    print(json.dumps(reference, indent=1))
    assert_same(metric_numbers(tmp), reference, f'panopticapi @ {PANOPTICAPI_COMMIT[:7]} run now')
    assert_same(EXPECTED, reference, f'panopticapi @ {PANOPTICAPI_COMMIT[:7]} run now (EXPECTED is stale)')
