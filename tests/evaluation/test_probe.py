"""beit_mm.evaluation.probe: the dense and image-level probes, and the ``dense_features`` interface of the models.

References (re-done here by hand, not with the code under test):
- patch labels: an explicit per-patch count (majority of the non-ignored labels, 255 when none, lowest id on ties);
- mIoU / mAcc / aAcc: mmseg's ``IoUMetric`` definition written with NumPy (IoU = TP / (TP + FP + FN) per class,
  classes without label or prediction left out, Acc = TP / label pixels), to 1e-5 (mmseg counts in float32);
- k-NN: DINO ``eval_knn.py`` ``knn_classifier`` (cosine similarity, top k, votes exp(sim / T)) with Python loops;
- the layers a segmentor reads: the ``out_indices`` of the UPerNet configs (mmseg ``upernet_beit.py`` (3, 5, 7, 11),
  BEiT-L (7, 11, 15, 23), the study's and the demo's);
- ``dense_features`` equals the backbone's own ``forward`` with those ``out_indices`` (exact).
"""
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.data.datasets import labeled_sets as D
from beit_mm.evaluation import probe as P
from beit_mm.models.backbones import BEiT, CvT
from beit_mm.models.builder import load_for_features

from ..conftest import ROOT, run_tool


def test_patch_labels_by_counting():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (2, 16, 24), generator=g)
    labels[0, :8, :8] = 255  # a patch with no labeled pixel
    labels[1, 8:, 16:] = torch.tensor([[2, 1] * 4] * 8)  # a tie 1 vs 2 -> 1
    out = P.patch_labels(labels, (2, 3), num_classes=3)  # label 3 is outside the classes: ignored
    for n in range(2):
        for i in range(2):
            for j in range(3):
                patch = labels[n, 8 * i:8 * i + 8, 8 * j:8 * j + 8].flatten().tolist()
                valid = [v for v in patch if v < 3]
                expect = 255 if not valid else max(range(3), key=lambda c: (valid.count(c), -c))
                assert out[n, i, j] == expect, (n, i, j)
    assert out[0, 0, 0] == 255 and out[1, 1, 2] == 1
    with pytest.raises(ValueError, match='patch grid'):
        P.patch_labels(labels, (3, 3), 3)


def mmseg_by_hand(pred: np.ndarray, target: np.ndarray, k: int) -> dict:
    keep = target != 255
    pred, target = pred[keep], target[keep]
    ious, accs = [], []
    for c in range(k):
        tp = np.sum((pred == c) & (target == c))
        union = np.sum((pred == c) | (target == c))
        if union:
            ious.append(tp / union)
        if np.sum(target == c):
            accs.append(tp / np.sum(target == c))
    return dict(mIoU=100 * np.mean(ious), mAcc=100 * np.mean(accs), aAcc=100 * np.mean(pred == target))


def test_segmentation_and_majority_metrics_by_hand():
    g = torch.Generator().manual_seed(1)
    target = torch.randint(0, 4, (500, ), generator=g)  # class 4 never appears
    target[::7] = 255
    pred = torch.randint(0, 5, (500, ), generator=g)
    got = P.segmentation_metrics(pred, target, 5)
    ref = mmseg_by_hand(pred.numpy(), target.numpy(), 5)
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert abs(got[key] - ref[key]) < 1e-5, key
    train_counts, val_counts = np.array([5, 30, 2, 0]), np.array([10, 20, 0, 5])
    got = P.majority_metrics(train_counts, val_counts)
    val = np.repeat(np.arange(4), val_counts)
    ref = mmseg_by_hand(np.ones_like(val), val, 4)
    assert got['majority_class'] == 1
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert abs(got[key] - ref[key]) < 1e-5, key


def test_knn_is_dinos_weighted_vote():
    g = torch.Generator().manual_seed(2)
    train, labels, query = torch.randn(40, 6, generator=g), torch.randint(0, 3, (40, ), generator=g), torch.randn(
        9, 6, generator=g)
    got = P.knn_predict(train, labels, query, 3, k=5, temperature=0.07)
    for q in range(9):
        sims = [float(torch.dot(query[q], t) / (query[q].norm() * t.norm())) for t in train]
        top = sorted(range(40), key=lambda i: -sims[i])[:5]
        votes = [sum(np.exp(sims[i] / 0.07) for i in top if labels[i] == c) for c in range(3)]
        assert got[q] == int(np.argmax(votes))


def test_linear_probe_fits_separable_classes_deterministically():
    g = torch.Generator().manual_seed(3)
    centers = torch.randn(4, 16, generator=g) * 3
    y = torch.arange(400) % 4
    x = centers[y] + 0.3 * torch.randn(400, 16, generator=g)
    a, b = P.fit_linear_probe(x, y, 4), P.fit_linear_probe(x, y, 4)
    assert torch.equal(a.weight, b.weight)
    assert (a(x).argmax(1) == y).float().mean() == 1.0


@pytest.mark.parametrize('depth,config', [
    (12, 'configs/_base_/models/upernet_beit.py'),
    (24, 'configs/beit/beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py'),
    (6, 'configs/studies/beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py'),
    (4, 'configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py'),
])
def test_beit_dense_features_are_the_segmentors_layers(depth, config):
    """Default layers = the UPerNet config's ``out_indices``; the maps equal ``forward``'s with them."""
    out_indices = tuple(Config.fromfile(os.path.join(ROOT, config)).model.backbone.out_indices)
    kwargs = dict(arch=dict(embed_dims=16, num_layers=depth, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=8,
                  drop_path_rate=0.0)
    model = BEiT(**kwargs, out_indices=(-1, ), final_norm=True).eval()
    assert model.segmentation_layers() == out_indices
    if depth > 6:
        return
    reference = BEiT(**kwargs, out_indices=out_indices).eval()
    reference.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith('norm.')})
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        got, want = model.dense_features(x), reference(x)
    assert len(got) == len(want) == len(out_indices)
    for a, b in zip(got[:-1], want[:-1]):
        assert torch.equal(a, b)
    # the last block passes the final norm when the backbone has one (the MIM backbone's output)
    assert torch.allclose(got[-1], torch.nn.functional.layer_norm(want[-1].transpose(1, 3), (16, ), model.norm.weight,
                                                                  model.norm.bias, 1e-6).transpose(1, 3), atol=1e-6)
    with pytest.raises(ValueError, match='block indices'):
        model.dense_features(x, [depth])


def test_cvt_and_dvae_dense_features():
    cvt = CvT(arch=dict(embed_dims=[8, 16, 24], depths=[1, 1, 1], num_heads=[1, 2, 3]), out_indices=(0, 1, 2)).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(cvt.dense_features(x), cvt(x)):
            assert torch.equal(a, b)
    from beit_mm.models.tokenizers.dvae import DVAE
    dvae = DVAE(group_count=4, n_hid=8, n_blk_per_group=1, vocab_size=16).eval()
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        last, = dvae.dense_features(images)
        assert torch.equal(dvae.encoder.blocks.output(last), dvae.encode(images))
        assert [tuple(m.shape) for m in dvae.dense_features(images, [0, -1])] == [(2, 8, 16, 16), (2, 64, 4, 4)]


def test_wrong_suffix_names_what_was_looked_for_and_found(tmp_path):
    root = make_demo_ade20k(str(tmp_path / 'set'), 6, 2, 32, seed=0, style='shapes')
    with pytest.raises(D.LabeledDataError) as err:
        D.build_seg_dataset(D.ade20k_dataset_cfg(root, 'training', 7, img_suffix='.png'))
    message = str(err.value)
    assert f'0 images matched *.png in {root}/images/training; found 6 *.jpg' in message, message
    assert 'Fix: pass the suffix' in message
    with pytest.raises(D.LabeledDataError) as err:
        D.build_seg_dataset(D.ade20k_dataset_cfg(root, 'training', 7, seg_map_suffix='.bmp'))
    assert f'6 of 6 images in {root}/images/training have no annotation *.bmp in {root}/annotations/training' in str(
        err.value) and 'found 6 *.png' in str(err.value)


DEMO = 'configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py'


def test_probe_tool_on_a_checkpoint_its_backbone_file_and_an_image_folder(tmp_path):
    """tools/analysis/probe.py: a whole-model checkpoint (seed 1 weights) and the same backbone as a backbone-only file
    (the layout of tools/convert_checkpoint.py outputs) give the same numbers, other than the random init's (seed 0);
    the last line is the summary; --imagenet-root adds the k-NN / linear top-1 lines."""
    import re

    from beit_mm.data.demo.imagenet import make_demo_imagenet
    labeled = make_demo_ade20k(str(tmp_path / 'ade'), 8, 4, 64, seed=0)
    images = make_demo_imagenet(str(tmp_path / 'in'), num_classes=3, per_class_train=6, per_class_val=3, size=64)
    model = load_for_features(os.path.join(ROOT, DEMO), None, seed=1)
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'whole.pth')
    torch.save({'state_dict': model.backbone.state_dict()}, tmp_path / 'backbone.pth')
    lines = {}
    for name in ('whole', 'backbone'):
        proc = run_tool(['tools/analysis/probe.py', DEMO, str(tmp_path / f'{name}.pth'), '--labeled-root', labeled,
                         '--num-classes', '22', '--imagenet-root', images])
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        lines[name] = proc.stdout.strip().splitlines()
    assert lines['whole'] == lines['backbone']
    last = lines['whole'][-1]
    match = re.fullmatch(r'probe mIoU ([\d.]+) \(random init ([\d.]+), majority ([\d.]+)\)', last)
    assert match, last
    assert match.group(1) != match.group(2)  # the checkpoint's weights were used, not the random ones
    assert any(re.match(r'checkpoint: k-NN top-1 [\d.]+, linear top-1 [\d.]+ \(9 validation images, 3 classes\)', line)
               for line in lines['whole']), lines['whole']
