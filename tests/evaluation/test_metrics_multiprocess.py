"""Every metric the configs evaluate with, and the numbers the pretraining hooks log, give on 2 processes what they
give on 1: ``PanopticQualityMetric``, mmdet's ``CocoMetric`` (with its file, and ``DatasetCocoMetric`` with the
dataset's instances), mmseg's ``IoUMetric``, mmpretrain's ``Accuracy``,
``DenseProbeHook`` and ``TokenizerEvalHook`` on a DDP-wrapped model.

Two gloo processes on CPU evaluate shards of an odd-sized dataset as MMEngine's loops do; a metric that enters a
collective in ``compute_metrics`` (rank 0 alone) fails after :data:`TIMEOUT` seconds naming each rank's collective."""
from __future__ import annotations

import faulthandler
import os
import os.path as osp
import pickle
import re
import time
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessException

from ..conftest import ROOT, free_port
from .panoptic_cases import CASES, META, mmdet_sample

WORLD = 2
TIMEOUT = 120  # seconds; a run takes a few
NUM_SEG, NUM_CLS, NUM_CLASSES = 7, 11, 5
ADE_TRAIN, ADE_VAL, ADE_CLASSES = 6, 3, 22  # the demo's labeled set for the hooks (raw ids up to 22)
CONFIGS = osp.join(ROOT, 'configs')
HOOK_MODELS = {  # name -> (config whose model is evaluated, image side)
    'dense_probe': (osp.join(CONFIGS, 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'), 96),
    'vqkd_heldout': (osp.join(CONFIGS, 'studies', 'vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py'),
                     64),
    'dvae_heldout': (osp.join(CONFIGS, 'demo', 'dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py'), 48),
}


def segmentation_samples(rng: np.random.Generator) -> list[dict]:
    """mmseg data samples: a prediction that is the ground truth with 20% of its pixels changed; 255 ignored."""
    samples = []
    for _ in range(NUM_SEG):
        gt = rng.integers(0, NUM_CLASSES, (12, 16))
        gt[rng.random(gt.shape) < 0.1] = 255
        pred = np.where(rng.random(gt.shape) < 0.2, rng.integers(0, NUM_CLASSES, gt.shape), gt) % 255
        samples.append(dict(pred_sem_seg=dict(data=torch.from_numpy(pred)[None]),
                            gt_sem_seg=dict(data=torch.from_numpy(gt)[None])))
    return samples


def classification_samples(rng: np.random.Generator) -> list[dict]:
    """mmpretrain data samples: random scores over 10 classes and labels."""
    return [dict(pred_score=torch.from_numpy(rng.random(10)).float(), gt_label=torch.tensor([int(rng.integers(10))]))
            for _ in range(NUM_CLS)]


def instance_samples(root: str, rng: np.random.Generator) -> tuple[str, dict, list[dict]]:
    """The COCO demo's validation instances (``make_demo_coco``) and predictions: each ground-truth box and mask
    shifted by up to 2 pixels with a random score, plus one random false positive per image."""
    from mmdet.datasets.api_wrappers import COCO

    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO, make_demo_coco
    make_demo_coco(root, 1, 5, 32, seed=0)
    ann_file = osp.join(root, 'annotations', 'instances_val2017.json')
    coco = COCO(ann_file)
    cat2label = {c: i for i, c in enumerate(coco.get_cat_ids(cat_names=COCO_DEMO_METAINFO['classes']))}
    samples = []
    for img_id in sorted(coco.get_img_ids()):
        info = coco.load_imgs([img_id])[0]
        boxes, labels, masks = [], [], []
        for ann in coco.load_anns(coco.get_ann_ids(img_ids=[img_id])):
            dx, dy = rng.integers(-2, 3, 2)
            x, y, w, h = ann['bbox']
            boxes.append([x + dx, y + dy, x + w + dx, y + h + dy])
            labels.append(cat2label[ann['category_id']])
            masks.append(np.roll(coco.annToMask(ann), (dy, dx), axis=(0, 1)))
        boxes.append([0, 0, 8, 8])
        labels.append(0)
        masks.append(np.pad(np.ones((8, 8), np.uint8), ((0, info['height'] - 8), (0, info['width'] - 8))))
        samples.append(dict(img_id=img_id, ori_shape=(info['height'], info['width']), pred_instances=dict(
            bboxes=torch.tensor(boxes, dtype=torch.float32), labels=torch.tensor(labels),
            scores=torch.from_numpy(rng.random(len(boxes))).float(), masks=torch.from_numpy(np.stack(masks)).bool())))
    return ann_file, dict(COCO_DEMO_METAINFO), samples


def with_dataset_instances(root: str, samples: list[dict]) -> list[dict]:
    """``samples`` carrying the ``instances`` of mmdet's ``CocoDataset`` over ``root``'s validation file."""
    from mmdet.datasets import CocoDataset

    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO
    dataset = CocoDataset(data_root=root, ann_file='annotations/instances_val2017.json',
                          data_prefix=dict(img='val2017/'), metainfo=dict(COCO_DEMO_METAINFO), test_mode=True,
                          pipeline=[])
    instances = {info['img_id']: info['instances'] for info in dataset}
    return [dict(sample, instances=instances[sample['img_id']]) for sample in samples]


def build_metrics(tmp: str) -> dict[str, tuple]:
    """name -> (metric factory, dataset_meta, data samples), from the pickle the parent wrote."""
    from mmdet.evaluation import CocoMetric
    from mmpretrain.evaluation import Accuracy
    from mmseg.evaluation import IoUMetric

    from beit_mm.evaluation.coco_instance import DatasetCocoMetric
    from beit_mm.evaluation.panoptic_quality import PanopticQualityMetric
    with open(osp.join(tmp, 'samples.pkl'), 'rb') as f:
        data = pickle.load(f)
    seg_meta = dict(classes=tuple(f'c{i}' for i in range(NUM_CLASSES)))
    return dict(
        panoptic=(lambda: PanopticQualityMetric(classwise=True), META, data['panoptic']),
        instance=(lambda: CocoMetric(ann_file=data['ann_file'], metric=['bbox', 'segm']), data['instance_meta'],
                  data['instance']),
        dataset_instance=(lambda: DatasetCocoMetric(metric=['bbox', 'segm']), data['instance_meta'],
                          data['dataset_instance']),
        semantic=(lambda: IoUMetric(iou_metrics=['mIoU', 'mFscore']), seg_meta, data['semantic']),
        classification=(lambda: Accuracy(topk=(1, 5)), {}, data['classification']))


def evaluate_hooks(tmp: str, work_dir: str) -> dict[str, dict]:
    """Each pretraining hook's numbers at the start of a run for its config's model (seed 0), DDP-wrapped when a process
    group is up; the hooks write into ``work_dir``."""
    from types import SimpleNamespace

    from mmengine.dist import is_distributed
    from mmengine.logging import MessageHub, MMLogger
    from mmengine.model import MMDistributedDataParallel

    from beit_mm.engine.hooks.dense_probe import DenseProbeHook
    from beit_mm.engine.hooks.tokenizer_eval import TokenizerEvalHook
    from beit_mm.models.builder import load_for_features as probe_model
    ade = osp.join(tmp, 'ade')
    results = {}
    for name, (config, size) in HOOK_MODELS.items():
        model = probe_model(config, seed=0).train()
        if name == 'vqkd_heldout':  # a trained codebook: unit codes of seed 0 (a run initializes it by k-means)
            codes = torch.randn(model.quantize.embedding.weight.shape, generator=torch.Generator().manual_seed(0))
            with torch.no_grad():
                model.quantize.embedding.weight.copy_(codes / codes.norm(dim=-1, keepdim=True))
                model.quantize.embedding.initted.fill_(1.0)
        if is_distributed():
            model = MMDistributedDataParallel(module=model)
        runner = SimpleNamespace(model=model, work_dir=work_dir, iter=0, logger=MMLogger.get_current_instance(),
                                 message_hub=MessageHub.get_current_instance())
        if name == 'dense_probe':
            hook = DenseProbeHook(ade, ADE_CLASSES, size, num_train=ADE_TRAIN, num_val=ADE_VAL)
            hook.before_train(runner)
            results[name] = hook.init_metrics
        else:
            hook = TokenizerEvalHook(osp.join(ade, 'images', 'validation'), size, num_images=ADE_VAL, grid_images=8)
            hook.before_train(runner)
            results[name] = hook.evaluate(runner)
    return results


def evaluate_all(tmp: str, work_dir: str) -> dict[str, dict]:
    """Each metric over its samples, sharded as MMEngine's ``DefaultSampler`` (unshuffled) shards them, in batches of
    2, then ``evaluate(len(dataset))``; then :func:`evaluate_hooks`."""
    from mmengine.dataset import DefaultSampler
    results = {}
    for name, (factory, meta, samples) in build_metrics(tmp).items():
        metric = factory()
        metric.dataset_meta = meta
        shard = [samples[i] for i in DefaultSampler(samples, shuffle=False)]
        for start in range(0, len(shard), 2):
            metric.process({}, shard[start:start + 2])
        results[name] = metric.evaluate(len(samples))
    return {**results, **evaluate_hooks(tmp, work_dir)}


def _rank(rank: int, tmp: str, port: int) -> None:
    """One process: gloo group, :func:`evaluate_all`, results to ``rank<r>.pkl``; its stack to ``rank<r>.stack`` and
    exit when it runs past :data:`TIMEOUT`."""
    stack = open(osp.join(tmp, f'rank{rank}.stack'), 'w')
    faulthandler.dump_traceback_later(TIMEOUT, exit=True, file=stack)
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=2 * TIMEOUT))
    results = evaluate_all(tmp, osp.join(tmp, f'rank{rank}'))
    with open(osp.join(tmp, f'rank{rank}.pkl'), 'wb') as f:
        pickle.dump(results, f)
    faulthandler.cancel_dump_traceback_later()
    dist.destroy_process_group()


def hang_report(tmp: str) -> str:
    """Per rank, the innermost ``torch.distributed`` call of its dumped stack (the collective it waits in) and the
    frame that called it."""
    lines = []
    for rank in range(WORLD):
        path = osp.join(tmp, f'rank{rank}.stack')
        frames = re.findall(r'File "([^"]+)", line (\d+) in (\w+)', open(path).read() if osp.exists(path) else '')
        inside = [i for i, (file, _, _) in enumerate(frames) if 'torch/distributed' in file]  # innermost first
        if not inside:
            lines.append(f'rank {rank}: no torch.distributed call in its stack')
            continue
        file, line, function = frames[inside[0]]
        callers = [f for f in frames[inside[0]:] if 'torch/distributed' not in f[0]]
        caller = f', called from {callers[0][2]} ({callers[0][0]}:{callers[0][1]})' if callers else ''
        lines.append(f'rank {rank}: waits in torch.distributed.{function} ({file}:{line}){caller}')
    return '\n'.join(lines)


@pytest.fixture(scope='module')
def runs(tmp_path_factory) -> tuple[dict, list[dict], str]:
    """(the metrics on 1 process, each rank's metrics on 2 processes, the folder holding their work dirs)."""
    tmp = str(tmp_path_factory.mktemp('metrics'))
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    rng = np.random.default_rng(0)
    make_demo_ade20k(osp.join(tmp, 'ade'), ADE_TRAIN, ADE_VAL, 64, seed=0)
    ann_file, instance_meta, instance = instance_samples(osp.join(tmp, 'coco'), rng)
    panoptic = [mmdet_sample(name, osp.join(tmp, f'{name}.png')) for name in CASES]
    with open(osp.join(tmp, 'samples.pkl'), 'wb') as f:
        pickle.dump(dict(panoptic=panoptic, ann_file=ann_file, instance_meta=instance_meta, instance=instance,
                         dataset_instance=with_dataset_instances(osp.join(tmp, 'coco'), instance),
                         semantic=segmentation_samples(rng), classification=classification_samples(rng)), f)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank: the same float reductions in the hooks' forward passes
    try:
        single = evaluate_all(tmp, osp.join(tmp, 'single'))
    finally:
        torch.set_num_threads(threads)
    context = mp.start_processes(_rank, args=(tmp, free_port()), nprocs=WORLD, join=False, start_method='spawn')
    deadline = time.monotonic() + TIMEOUT + 60  # each rank dumps its stack and exits after TIMEOUT s
    while any(p.is_alive() for p in context.processes) and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        context.join()
    except ProcessException as error:
        pytest.fail(f'{WORLD} gloo processes did not finish: {error}\n{hang_report(tmp)}')
    ranks = []
    for rank in range(WORLD):
        with open(osp.join(tmp, f'rank{rank}.pkl'), 'rb') as f:
            ranks.append(pickle.load(f))
    return single, ranks, tmp


@pytest.mark.parametrize('name', ['panoptic', 'instance', 'dataset_instance', 'semantic', 'classification',
                                  *HOOK_MODELS])
def test_two_processes_equal_one(runs, name):
    """Every rank gets the one-process numbers of the whole dataset (7, 5, 7 and 11 samples: odd sizes; the hooks:
    their held-out images)."""
    single, ranks, _ = runs
    assert single[name], name
    for rank, got in enumerate(ranks):
        assert set(got[name]) == set(single[name]), (rank, name)
        for key, value in single[name].items():
            if value is None:
                assert got[name][key] is None, (rank, key)
            else:
                np.testing.assert_allclose(np.asarray(got[name][key], dtype=np.float64),
                                           np.asarray(value, dtype=np.float64), rtol=0, atol=1e-9,
                                           err_msg=f'rank {rank} {key}')


def test_hooks_write_their_files_from_the_main_process_only(runs):
    """The dense probe's curve and the tokenizers' held-out records (and the dVAE's picture) come from rank 0; rank 1
    writes nothing."""
    tmp = runs[2]
    written = {rank: sorted(osp.relpath(osp.join(d, f), osp.join(tmp, rank)) for d, _, files in
                            os.walk(osp.join(tmp, rank)) for f in files) for rank in ('single', 'rank0', 'rank1')}
    assert written['rank0'] == written['single'], written
    assert {'dense_probe.json', 'tokenizer_eval/iter_1.json', 'tokenizer_eval/iter_1.png'} <= set(written['rank0'])
    assert written['rank1'] == [], written['rank1']
