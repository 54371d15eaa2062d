"""Panoptic and instance EoMT through ONNX: tools/export.py writes the raw class and mask logits (onnxruntime equals
PyTorch within 1e-4, also at another batch size with --dynamic-batch), and tools/infer.py --onnx writes the same
panoptic segments and instance results as tools/infer.py with the checkpoint, on the COCO demo configs (random
weights, the class and mask heads scaled so that queries pass the 0.8 thresholds)."""
import json
import os
import os.path as osp
import sys

import numpy as np
import onnx
import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.export import MASK_OUTPUTS, TASK_KEY, export_module, export_onnx, external_tensors
from beit_mm.data.demo.coco import make_demo_coco

from ..conftest import ROOT, load_tool

DEMOS = osp.join(ROOT, 'configs', 'demo')
CONFIGS = {'panoptic': osp.join(DEMOS, 'eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py'),
           'instance': osp.join(DEMOS, 'eomt_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py')}
TOL = 1e-4


@pytest.fixture(scope='module')
def coco(tmp_path_factory) -> str:
    """The generated COCO demo's validation images (3 images of various aspect ratios)."""
    root = make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'coco'), 2, 3, 64, seed=3)
    return osp.join(root, 'val2017')


def _model(task: str) -> torch.nn.Module:
    """The demo config's EoMT with random weights, annealing done."""
    torch.manual_seed(0)
    model = build_from_config(Config.fromfile(CONFIGS[task]))
    model.attn_mask_probs.zero_()
    return model


def _sharpened(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its class and mask heads scaled, in place."""
    with torch.no_grad():
        model.class_head.weight.mul_(20.0)
        model.mask_head[0].weight.mul_(10.0)
        model.mask_head[-1].weight.mul_(10.0)
    return model


def _checkpoint(task: str, path: str) -> None:
    """:func:`_model` with the heads scaled (confident queries, sharp masks: some queries keep most of their own
    mask), saved with mmdet's dataset_meta as tools/train.py saves it: COCO's 133-colour palette for the demo's 5
    classes."""
    from mmdet.datasets import CocoPanopticDataset
    model = _sharpened(_model(task))
    classes = Config.fromfile(CONFIGS[task]).train_dataloader.dataset.metainfo['classes']
    meta = dict(dataset_meta=dict(classes=classes, palette=CocoPanopticDataset.METAINFO['palette']))
    torch.save({'state_dict': model.state_dict(), 'meta': meta}, path)


def _infer(monkeypatch, *argv: str) -> None:
    monkeypatch.setattr(sys, 'argv', ['tools/infer.py', *argv])
    load_tool('tools/infer.py').main()


@pytest.mark.parametrize('task', ['panoptic', 'instance'])
def test_onnx_logits_equal_pytorch_at_two_batch_sizes(task, tmp_path):
    """The demo EoMT's raw class and mask logits from one --dynamic-batch file at batch 1 and 3: within 1e-4."""
    import onnxruntime as ort
    model, out = _model(task), str(tmp_path / 'eomt.onnx')
    assert export_onnx(model, 'segmentor', (64, 64), out, dynamic_batch=True) == list(MASK_OUTPUTS)
    proto = onnx.load(out)
    assert not external_tensors(proto) and {p.key: p.value for p in proto.metadata_props}[TASK_KEY] == task
    session = ort.InferenceSession(out, providers=['CPUExecutionProvider'])
    module = export_module(model, 'segmentor', (64, 64))
    for batch in (1, 3):
        x = torch.randn(batch, 3, 64, 64, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            ref = module(x)
        got = session.run(None, {'input': x.numpy()})
        for name, g, r in zip(MASK_OUTPUTS, got, ref):
            assert g.shape == tuple(r.shape)
            diff = float(np.abs(g - r.numpy()).max())
            print(f'{task} {name} batch {batch}: max |diff| {diff:.2e}')
            assert diff <= TOL, f'{name} at batch {batch}: onnxruntime vs PyTorch max |diff| {diff:.2e} > {TOL}'


@pytest.mark.parametrize('task', ['panoptic', 'instance'])
def test_infer_onnx_writes_the_checkpoints_segments_and_instances(task, coco, tmp_path, monkeypatch, capsys):
    """tools/export.py of a checkpoint trained as the demo saves it (COCO's palette for 5 classes), then tools/infer.py
    with the checkpoint and with --onnx: the same panoptic PNGs and segments, the same instance masks, labels and
    boxes (scores within 1e-4)."""
    ckpt, out = str(tmp_path / 'eomt.pth'), str(tmp_path / 'eomt.onnx')
    _checkpoint(task, ckpt)
    load_tool('tools/export.py').main([CONFIGS[task], ckpt, '--shape', '64', '64', '--out', out])
    assert 'onnxruntime vs PyTorch (fp32, batch 1): max |diff|' in capsys.readouterr().out
    # tools/infer.py with the checkpoint and with --onnx: the same files
    _infer(monkeypatch, CONFIGS[task], ckpt, coco, '--out-dir', str(tmp_path / 'ckpt'), '--device', 'cpu')
    _infer(monkeypatch, CONFIGS[task], '--onnx', out, coco, '--out-dir', str(tmp_path / 'onnx'))
    pred = sorted(os.listdir(tmp_path / 'ckpt' / 'pred'))
    assert pred == sorted(os.listdir(tmp_path / 'onnx' / 'pred')) and len(pred) == (6 if task == 'panoptic' else 3)
    assert sorted(os.listdir(tmp_path / 'onnx' / 'vis')) == sorted(os.listdir(coco))
    found = 0
    for name in pred:
        ref_file, got_file = tmp_path / 'ckpt' / 'pred' / name, tmp_path / 'onnx' / 'pred' / name
        if name.endswith('.png'):
            assert ref_file.read_bytes() == got_file.read_bytes(), f'{name}: the panoptic PNGs differ'
            continue
        ref, got = json.loads(ref_file.read_text()), json.loads(got_file.read_text())
        if task == 'panoptic':
            assert got == ref, f'{name}: segments differ'
            found += len(ref['segments_info'])
        else:
            assert got['labels'] == ref['labels'] and got['masks'] == ref['masks'] and got['bboxes'] == ref['bboxes']
            np.testing.assert_allclose(got['scores'], ref['scores'], rtol=0, atol=TOL)
            found += sum(s >= 0.5 for s in ref['scores'])
    print(f'{task}: {found} segments/instances (score >= 0.5) identical through ONNX')
    assert found >= 2, 'the crafted weights give a few segments or confident instances'


def test_a_dataset_palette_longer_than_the_classes_is_cut_to_them():
    """mmdet keeps a dataset's whole palette when a config names fewer classes: colour i stays class i's; a colour
    that is not [r, g, b] bytes is still refused."""
    from beit_mm.apis.export import ExportError, dataset_meta_json
    text = dataset_meta_json({'classes': ('a', 'b'), 'palette': [(1, 2, 3), (4, 5, 6), (7, 8, 9)]}, 'x.pth')
    assert json.loads(text) == {'classes': ['a', 'b'], 'palette': [[1, 2, 3], [4, 5, 6]]}
    with pytest.raises(ExportError, match=r'x\.pth: meta\.dataset_meta palette is not one \[r, g, b\]'):
        dataset_meta_json({'classes': ('a', 'b'), 'palette': [(1, 2, 3), (4, 5, 256)]}, 'x.pth')


@pytest.mark.parametrize('task', ['panoptic', 'instance'])
def test_infer_post_processing_is_the_models_predict(task):
    """predict_masks (tools/infer.py, checkpoint and --onnx) from the raw logits equals EoMT.predict on one padded
    input: the same panoptic map, the same instance masks, labels and scores."""
    from mmdet.structures import DetDataSample

    from beit_mm.apis.mask_inference import postprocess_settings, predict_masks
    cfg = Config.fromfile(CONFIGS[task])
    model = _sharpened(_model(task))
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    meta = dict(img_shape=(43, 64), ori_shape=(70, 104), batch_input_shape=(64, 64))
    with torch.no_grad():
        ref = model.predict(x, [DetDataSample(metainfo=meta)])[0]
        masks, classes = model.forward_predictions(x)
        got = predict_masks(task, masks[-1][0], classes[-1][0], (64, 64), meta['img_shape'], meta['ori_shape'],
                            postprocess_settings(cfg))
    if task == 'panoptic':
        assert len(np.unique(got)) > 1, 'a segment besides void'
        assert np.array_equal(got, ref.pred_panoptic_seg.sem_seg[0].numpy())
    else:
        instances = ref.pred_instances
        assert np.array_equal(got[0], instances.masks.numpy()) and np.array_equal(got[1], instances.labels.numpy())
        assert np.array_equal(got[2], instances.scores.numpy())
