"""Evaluators follow the datasets' roots: a metric reads its ground truth from the data samples of the dataset it
scores, or the check before training (``beit_mm.data.checks.check_evaluator_files``) names a file it would read from
elsewhere.

docs/data.md tells users to move a dataset with ``--cfg-options <loader>.dataset.data_root=...``; a metric holding its
own annotation path (mmdet's ``CocoMetric(ann_file=...)``) kept reading the config's ``data/coco/...`` and the run
failed when the validation loop was built."""
from __future__ import annotations

import glob
import os
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config

from beit_mm.data.checks import (EVALUATOR_INPUTS, DatasetCheckError, check_evaluator_files, dataset_configs,
                                 evaluator_metrics)
from beit_mm.data.checks.config import EVALUATED_LOADERS

from ..conftest import ROOT

CONFIGS = sorted(p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
                 if f'{os.sep}_base_{os.sep}' not in p)
FILE_SUFFIXES = ('.json', '.png', '.txt', '.pkl', '.csv')
INSTANCE_DEMOS = [osp.join(ROOT, 'configs', 'demo', f'{family}_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py')
                  for family in ('eomt', 'mask2former')]


def _path_arguments(node, where: str = '') -> list[tuple[str, str]]:
    """``(argument, value)`` of every string in a metric config that names a file or folder."""
    found = []
    for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
        name = f'{where}.{key}' if where else str(key)
        if isinstance(value, (dict, list, tuple)):
            found += _path_arguments(value, name)
        elif isinstance(value, str) and key != 'type' and ('/' in value or value.endswith(FILE_SUFFIXES)):
            found.append((name, value))
    return found


def _packed_keys(dataset) -> tuple:
    pack = [t for t in dataset.get('pipeline') or [] if str(t.get('type', '')).endswith('PackDetInputs')]
    return tuple(pack[-1].get('meta_keys', ())) if pack else ()


def evaluator_problems(config: str, moved: str) -> list[str]:
    """What keeps ``config``'s evaluators from following its datasets moved to ``moved``: a path argument the check
    does not see, one it does not name, mmdet's ``CocoMetric`` without a file, a dataset metric without the packed
    ``instances``."""
    cfg = Config.fromfile(config)
    for loader in EVALUATED_LOADERS:
        if (cfg.get(loader) or {}).get('dataset'):
            for ds in dataset_configs(cfg[loader]['dataset']):
                ds['data_root'] = moved
    problems = []
    for loader, evaluator_key in EVALUATED_LOADERS.items():
        if not (cfg.get(loader) or {}).get('dataset') or not cfg.get(evaluator_key):
            continue
        for key, metric in evaluator_metrics(cfg[evaluator_key], evaluator_key):
            kind = metric.get('type')
            for argument, path in _path_arguments(metric):
                if argument not in EVALUATOR_INPUTS:
                    problems.append(f'{key}.{argument}={path!r} ({kind}) is a path the check does not read')
                    continue
                try:
                    check_evaluator_files(cfg, [loader])
                    problems.append(f'{key}.{argument}={path!r} ({kind}) passed the check with the data at {moved}')
                except DatasetCheckError as error:
                    if f'{key}.{argument}' not in str(error) or path not in str(error):
                        problems.append(f'{key}.{argument}: the check names another file: {error}')
            if kind == 'mmdet.CocoMetric' and not metric.get('ann_file'):
                problems.append(f'{key}: mmdet.CocoMetric converts the dataset with box areas; use '
                                'beit_mm.DatasetCocoMetric')
            if kind == 'beit_mm.DatasetCocoMetric':
                for ds in dataset_configs(cfg[loader]['dataset']):
                    if 'instances' not in _packed_keys(ds):
                        problems.append(f'{key}: {loader} packs no instances for beit_mm.DatasetCocoMetric')
    return problems


def test_every_evaluator_follows_the_data_root_or_is_checked(tmp_path):
    """Every config with each evaluated dataset's ``data_root`` moved: its metrics read the data samples, or the check
    before training names each file a metric would read from the old root, with the key to set."""
    moved = str(tmp_path / 'moved')
    problems = {osp.relpath(c, ROOT): p for c in CONFIGS if (p := evaluator_problems(c, moved))}
    assert not problems, '\n'.join(f'{c}: {p}' for c, ps in problems.items() for p in ps)


def test_check_names_the_stale_file_and_the_key_to_set(tmp_path):
    """The ViT-Adapter COCO panoptic config keeps mmdet's instance file (the panoptic dataset holds no instance
    masks): moved, the check names it and the key; pointed at the moved copy, it passes."""
    config = osp.join(ROOT, 'configs', 'vit_adapter', 'mask2former_beitv2-adapter-large_16xb1-265k_coco-panoptic.py')
    root = tmp_path / 'coco'
    (root / 'annotations').mkdir(parents=True)
    (root / 'annotations' / 'instances_val2017.json').write_text('{}')
    cfg = Config.fromfile(config)
    cfg.merge_from_dict({'val_dataloader.dataset.data_root': f'{root}/'})
    with pytest.raises(DatasetCheckError) as error:
        check_evaluator_files(cfg, ['val_dataloader'])
    fixed = f'val_evaluator.1.ann_file={root}/annotations/instances_val2017.json'
    assert 'data/coco/annotations/instances_val2017.json is not under the data_root' in str(error.value)
    assert f'Fix: --cfg-options {fixed}' in str(error.value), error.value
    cfg.merge_from_dict(dict([fixed.split('=')]), allow_list_keys=True)
    check_evaluator_files(cfg, ['val_dataloader'])


def _predictions(dataset) -> list[dict]:
    """Per image a prediction from its ground truth: each mask shifted by up to 2 pixels, random scores, plus one
    false positive; the sample carries the dataset's ``instances``."""
    from pycocotools import mask as mask_util
    rng = np.random.default_rng(0)
    samples = []
    for info in dataset:
        h, w = info['height'], info['width']
        boxes, labels, masks = [], [], []
        for ann in info['instances']:
            dy, dx = rng.integers(-2, 3, 2)
            x1, y1, x2, y2 = ann['bbox']
            segmentation = ann['mask']
            rle = (mask_util.merge(mask_util.frPyObjects(segmentation, h, w)) if isinstance(segmentation, list)
                   else segmentation)
            masks.append(np.roll(mask_util.decode(rle), (dy, dx), axis=(0, 1)))
            boxes.append([x1 + dx, y1 + dy, x2 + dx, y2 + dy])
            labels.append(ann['bbox_label'])
        boxes.append([0, 0, 8, 8])
        labels.append(0)
        masks.append(np.pad(np.ones((8, 8), np.uint8), ((0, h - 8), (0, w - 8))))
        samples.append(dict(img_id=info['img_id'], ori_shape=(h, w), instances=info['instances'],
                            pred_instances=dict(bboxes=torch.tensor(boxes, dtype=torch.float32),
                                                labels=torch.tensor(labels),
                                                scores=torch.from_numpy(rng.random(len(boxes))).float(),
                                                masks=torch.from_numpy(np.stack(masks)).bool())))
    return samples


def test_dataset_metric_equals_the_annotation_file(tmp_path):
    """``DatasetCocoMetric`` on the dataset's instances gives mmdet's ``CocoMetric`` numbers with the annotation file,
    the small/medium split included (160 px demo images: objects on both sides of 32^2 pixels)."""
    from mmdet.datasets import CocoDataset
    from mmdet.evaluation import CocoMetric

    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO, make_demo_coco
    from beit_mm.evaluation.coco_instance import DatasetCocoMetric
    root = make_demo_coco(str(tmp_path / 'coco'), 1, 12, 160, seed=0)
    meta = dict(COCO_DEMO_METAINFO)
    dataset = CocoDataset(data_root=root, ann_file='annotations/instances_val2017.json', metainfo=meta,
                          data_prefix=dict(img='val2017/'), test_mode=True, pipeline=[])
    samples = _predictions(dataset)
    results = []
    for metric in (CocoMetric(ann_file=osp.join(root, 'annotations', 'instances_val2017.json'),
                              metric=['bbox', 'segm']), DatasetCocoMetric(metric=['bbox', 'segm'])):
        metric.dataset_meta = meta
        metric.process({}, samples)
        results.append(metric.evaluate(len(samples)))
    from_file, from_dataset = results
    assert from_file['coco/segm_mAP_s'] >= 0 and from_file['coco/segm_mAP_m'] >= 0, from_file
    assert from_dataset == from_file


def test_dataset_metric_names_what_it_misses():
    from beit_mm.evaluation.coco_instance import DatasetCocoMetric
    with pytest.raises(ValueError, match='drop ann_file, or use mmdet.CocoMetric'):
        DatasetCocoMetric(ann_file='data/coco/annotations/instances_val2017.json')
    with pytest.raises(KeyError, match="add 'instances' to the meta_keys"):
        DatasetCocoMetric().process({}, [dict(img_path='a.jpg', img_id=0, ori_shape=(4, 4), pred_instances={})])


def test_instance_demos_train_and_test_with_only_the_datasets_roots(tmp_path, capsys):
    """The EoMT and Mask2Former COCO instance demos (Mask2Former's head narrowed), trained 2 iterations and tested
    through the library's train and test entries with only the datasets' roots set (docs/data.md), print their mask
    AP."""
    from beit_mm.apis import run_test, train
    from beit_mm.data.demo.coco import make_demo_coco
    root = make_demo_coco(str(tmp_path / 'my_coco'), 4, 2, 64, seed=0)
    options = {f'{loader}.{key}': value for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')
               for key, value in (('dataset.data_root', root), ('num_workers', 0), ('persistent_workers', False))}
    narrow = {'eomt': {}, 'mask2former': {
        'model.panoptic_head.num_queries': 10, 'model.panoptic_head.pixel_decoder.encoder.num_layers': 1,
        'model.panoptic_head.transformer_decoder.num_layers': 2, 'model.test_cfg.max_per_image': 20}}
    for config in INSTANCE_DEMOS:
        work = str(tmp_path / osp.basename(config))
        model = narrow[osp.basename(config).split('_')[0]]
        train(config, work_dir=work, cfg_options={**options, **model, 'train_dataloader.batch_size': 2,
                                                  'train_cfg.max_iters': 2, 'train_cfg.val_interval': 2})
        metrics = run_test(config, work, work_dir=osp.join(work, 'test'), cfg_options={**options, **model})['metrics']
        assert {'coco/segm_mAP', 'coco/segm_mAP_50', 'coco/segm_mAP_75'} <= set(metrics), (config, metrics)
        assert 0.0 <= metrics['coco/segm_mAP'] <= 1.0, (config, metrics)
    out = capsys.readouterr()
    assert (out.out + out.err).count('Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]') >= 4
