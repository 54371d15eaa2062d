"""EoMT panoptic and instance segmentation: the official post-processing on hand-made logits (tue-mps/eomt @ 7bd19dd,
``training/lightning_module.py:747-813`` and ``training/mask_classification_instance.py:107-136``, exact), the targets
from mmdet's samples, and each COCO demo config trained a few iterations and tested."""
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from mmdet.structures import DetDataSample
from mmengine.config import Config

from beit_mm.apis.testing import run_test
from beit_mm.data.demo.coco import make_demo_coco
from beit_mm.models.losses.mask_classification import panoptic_targets
from beit_mm.models.segmentors.mask_postprocess import instance_results, panoptic_segments, to_original_size

from ..conftest import ROOT, run_train
from ..support.demo_configs import short_demo

DEMOS = osp.join(ROOT, 'configs', 'demo')
PANOPTIC = osp.join(DEMOS, 'eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')
ADE20K_PANOPTIC = osp.join(DEMOS, 'eomt_beit-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py')
ITERS = 3
BIG = 20.0  # a logit whose sigmoid/softmax is 1 to float precision


def _class_logits(*labels: int, num_classes: int = 3) -> torch.Tensor:
    """One query per label (``num_classes`` = no object): that class certain."""
    logits = torch.full((len(labels), num_classes + 1), -BIG)
    logits[torch.arange(len(labels)), torch.tensor(labels)] = BIG
    return logits


def test_panoptic_post_processing_follows_the_official_rules():
    """Classes: thing 0, stuff 1 and 2 (num_things 1); a 4 x 4 image. Query 0: stuff 1 on the top half; query 1: the
    thing on the bottom-left 2 x 2; query 2: stuff 1 again on the bottom-right column (merges with query 0's segment);
    query 3: no object; query 4: the thing again, but its mask (the whole image) is mostly won by others (area kept
    4 / 16 < overlap 0.8): dropped."""
    masks = torch.full((5, 4, 4), -BIG)
    masks[0, :2] = BIG
    masks[1, 2:, :2] = BIG
    masks[2, 2:, 3] = BIG
    masks[3] = BIG
    masks[4] = 0.5  # sigmoid 0.62: loses every pixel where another query is certain
    got = panoptic_segments(masks, _class_logits(1, 0, 1, 3, 0), num_things=1)
    void = 3
    thing = 0 + 2 * 1000  # label + (segment number + 1) x INSTANCE_OFFSET: the second segment
    expected = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [thing, thing, void, 1], [thing, thing, void, 1]])
    # pixels (2..3, 2): query 4 (0.62 >= 0.5) wins them, but it keeps 2 of its 16 pixels: dropped, void
    torch.testing.assert_close(got, expected)
    # a class probability under mask_thresh keeps nothing
    weak = _class_logits(1, 0, 1, 3, 0) / BIG  # softmax of a +-1 row over 4 entries: max 0.71 < 0.8
    assert (panoptic_segments(masks, weak, num_things=1) == void).all()


def test_instance_post_processing_follows_the_official_rules():
    """Top-k over query x class probabilities, label = index % C, query = index // C, score = probability x the mean
    sigmoid inside ``logit > 0``."""
    class_logits = torch.tensor([[2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])  # 2 queries, 2 classes + no object
    masks = torch.tensor([[[1.0, -1.0], [2.0, -3.0]], [[-1.0, -1.0], [-1.0, 4.0]]])
    got_masks, labels, scores = instance_results(masks, class_logits, top_k=3)
    probs = class_logits.softmax(-1)[:, :-1].flatten()
    order = probs.topk(3, sorted=False).indices
    assert labels.tolist() == (order % 2).tolist() and len(labels) == 3
    for mask, label, score, index in zip(got_masks, labels, scores, order.tolist()):
        query = index // 2
        assert torch.equal(mask, masks[query] > 0)
        inside = masks[query][masks[query] > 0].sigmoid()
        assert score.item() == pytest.approx(probs[index].item() * inside.mean().item(), rel=1e-5)


def test_panoptic_targets_from_mmdet_samples():
    """Thing instances first (mmdet's gt_instances), then one mask per stuff class in gt_sem_seg; void (255) and
    thing labels of the semantic map (crowd regions) in none."""
    seg = torch.tensor([[2, 2, 255], [1, 0, 2]])
    things = torch.tensor([[[0, 0, 0], [0, 1, 0]]], dtype=torch.bool)
    masks, labels = panoptic_targets(things, torch.tensor([0]), seg, num_things=2)
    assert labels.tolist() == [0, 2]
    assert masks.tolist() == [[[False, False, False], [False, True, False]],
                              [[True, True, False], [False, False, True]]]
    inst_masks, inst_labels = panoptic_targets(things, torch.tensor([0]), None, num_things=2)
    assert inst_labels.tolist() == [0] and torch.equal(inst_masks, things)


def test_eomt_predicts_mmdet_results_at_the_original_size():
    cfg = Config.fromfile(PANOPTIC)
    from beit_mm.registry import MODELS
    model = MODELS.build(cfg.model).eval()
    sample = DetDataSample(metainfo=dict(img_shape=(43, 64), ori_shape=(64, 96), batch_input_shape=(64, 64)))
    with torch.no_grad():
        out = model.predict(torch.randn(1, 3, 64, 64), [sample])[0]
    assert out.pred_panoptic_seg.sem_seg.shape == (1, 64, 96)
    model.task = 'instance'
    with torch.no_grad():
        out = model.predict(torch.randn(1, 3, 64, 64), [DetDataSample(metainfo=sample.metainfo)])[0]
    assert out.pred_instances.masks.shape == (100, 64, 96) and out.pred_instances.bboxes.shape == (100, 4)


REFERENCE = osp.join(sys.prefix, 'reference', 'transformers-4.57.6')
HF_SCRIPT = osp.join(ROOT, 'tests', 'support', 'eomt_hf_panoptic_reference.py')


def test_panoptic_segments_equal_transformers_post_processing(tmp_path):
    """Random logits of 2 images (20 queries, each mask a region of a random partition plus noise; 6 classes of which
    3 stuff; masks at 16 x 16 for a 64 x 64 input; the images 96 x 128 and 64 x 48 before resizing) through
    transformers 4.57.6's ``post_process_panoptic_segmentation`` and through :func:`to_original_size` +
    :func:`panoptic_segments`: the same pixels in the same segments with the same classes (transformers drops a
    segment at an area ratio of exactly 0.8, the official code keeps it: random logits never hit it)."""
    if not osp.isdir(REFERENCE):
        pytest.fail(f'{REFERENCE} is missing: tools/setup_env.sh installs the HF EoMT reference there')
    gen = torch.Generator().manual_seed(0)
    num_classes, num_things, side = 6, 3, 64
    class_logits = 4 * torch.randn(2, 20, num_classes + 1, generator=gen)
    # each query's mask: a region of a random 4 x 4 partition (logit +3 inside, -3 outside) plus noise, so that some
    # kept queries' area ratios fall under the 0.8 threshold (0.52-0.78) and others just above it (0.82-0.90)
    regions = torch.randint(0, 20, (2, 1, 4, 4), generator=gen).float()
    regions = F.interpolate(regions, (16, 16), mode='nearest')
    inside = regions == torch.arange(20).view(1, 20, 1, 1)
    mask_logits = torch.where(inside, 3.0, -3.0) + 3.5 * torch.randn(2, 20, 16, 16, generator=gen)
    ori_shapes, img_shapes = [(96, 128), (64, 48)], [(48, 64), (64, 48)]
    torch.save(dict(class_logits=class_logits, mask_logits=mask_logits, size=side, target_sizes=ori_shapes,
                    stuff_classes=list(range(num_things, num_classes))), tmp_path / 'in.pt')
    proc = subprocess.run([sys.executable, HF_SCRIPT, str(tmp_path / 'in.pt'), str(tmp_path / 'out.pt')], cwd=ROOT,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REFERENCE))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    reference = torch.load(tmp_path / 'out.pt')
    for i, ref in enumerate(reference):
        logits = to_original_size(mask_logits[i], (side, side), img_shapes[i], ori_shapes[i])
        ours = panoptic_segments(logits, class_logits[i], num_things)
        hf_class = torch.full_like(ref['segmentation'], num_classes)
        for segment, label in ref['labels'].items():
            hf_class[ref['segmentation'] == segment] = label
        torch.testing.assert_close(ours % 1000, hf_class, rtol=0, atol=0)  # classes per pixel, void included
        pairs = torch.stack([ours.flatten(), ref['segmentation'].flatten()]).unique(dim=1)
        assert len(pairs[0].unique()) == len(pairs[1].unique()) == pairs.shape[1]  # a one-to-one segment map
        assert len(ref['labels']) >= 3, 'the example should make several segments'


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 4, 2, 64, seed=0)


def _tiny(config: str, coco_root: str, work_dir) -> Config:
    cfg = short_demo(config, coco_root, work_dir, ITERS)
    cfg.model.mask_annealing = dict(start_steps=[1, 2], end_steps=[2, 3])
    return cfg


def test_panoptic_demo_trains_then_tests_with_pq(coco_root, tmp_path, capsys):
    cfg = _tiny(PANOPTIC, coco_root, tmp_path / 'work')
    log = run_train(cfg, tmp_path / 'panoptic.py')
    assert re.search(rf'Iter\(train\) \[{ITERS}/{ITERS}\].*loss_cls_block_-2', log), log[-2000:]
    result = run_test(str(tmp_path / 'panoptic.py'), str(tmp_path / 'work' / f'iter_{ITERS}.pth'),
                      work_dir=str(tmp_path / 'test'))  # tools/test.py, in-process
    out = capsys.readouterr().out
    assert re.search(r'\| Things \| [\d.]+ +\| [\d.]+ +\| [\d.]+ +\| 2 ', out), out[-3000:]  # mmdet's table
    assert {'coco_panoptic/PQ', 'coco_panoptic/SQ', 'coco_panoptic/RQ', 'coco_panoptic/PQ_th'} <= set(result['metrics'])
    assert re.search(r'Iter\(test\).*coco_panoptic/PQ: [\d.]+ +coco_panoptic/SQ: [\d.]+ +coco_panoptic/RQ: '
                     r'[\d.]+ +coco_panoptic/PQ_th: [\d.]+', out), out[-3000:]


def test_ade20k_panoptic_demo_trains_then_tests_with_pq(tmp_path_factory, tmp_path, capsys):
    """The ADE20K panoptic demo (semantic + instance PNGs, 150 classes, things first) trained 3 iterations, then
    tools/test.py's library entry printing PQ over the classes present and drawing mmdet's panoptic pictures."""
    from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
    root = make_demo_ade20k_panoptic(str(tmp_path_factory.mktemp('ade') / 'demo'), 4, 2, 64, seed=0)
    cfg = _tiny(ADE20K_PANOPTIC, root, tmp_path / 'work')
    log = run_train(cfg, tmp_path / 'panoptic.py')
    assert re.search(rf'Iter\(train\) \[{ITERS}/{ITERS}\]', log), log[-2000:]
    result = run_test(str(tmp_path / 'panoptic.py'), str(tmp_path / 'work'), work_dir=str(tmp_path / 'test'),
                      show_dir=str(tmp_path / 'show'))  # tools/test.py --show-dir: mmdet's panoptic pictures
    out = capsys.readouterr().out
    assert len(os.listdir(tmp_path / 'show' / 'vis_data' / 'vis_image')) == 2  # one per validation image
    assert re.search(r'\| Things \| [\d.]+ +\| [\d.]+ +\| [\d.]+ +\| 2 ', out), out[-3000:]  # person, car
    assert re.search(r'\| Stuff +\| [\d.]+ +\| [\d.]+ +\| [\d.]+ +\| [23] ', out), out[-3000:]
    assert 0.0 <= result['metrics']['coco_panoptic/PQ'] <= 100.0
