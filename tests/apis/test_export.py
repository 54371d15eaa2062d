"""ONNX export (``tools/export.py``, ``beit_mm.apis.export``) checked with onnxruntime against the PyTorch model: fp32
max |diff| <= 1e-4, argmax equal where the top-2 margin exceeds 2 x max |diff| (``compare_outputs``). Covered: BEiT +
UPerNet at its own and another grid, a CvT classifier, a bare BEiT backbone, ``tools/infer.py --onnx`` and EoMT."""
import json
import os
import os.path as osp
import re

import numpy as np
import onnx
import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.export import (MatrixAdaptiveAvgPool2d, compare_outputs, describe_comparison, export_module,
                                fix_input_grid, onnx_metadata)
from beit_mm.apis.onnx_inference import infer_onnx
from beit_mm.apis.segment import infer_images
from beit_mm.data.demo.ade20k import make_demo_ade20k

from ..conftest import ROOT, assert_close_to_scale, load_tool

TINY_SEG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
BEIT_B_512 = osp.join(ROOT, 'configs', 'beit', 'beit-base_upernet_8xb2-160k_ade20k-512x512.py')
CVT_CLS = osp.join(ROOT, 'configs', 'demo', 'cvt-13-tiny_1xb32-30e_in1k-demo-64px.py')
BEIT_MIM = osp.join(ROOT, 'configs', 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')
EOMT_DEMO = osp.join(ROOT, 'configs', 'demo', 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')
TOL = 1e-4


def _checkpoint(cfg: Config, path, seed: int = 0, meta: dict | None = None):
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    for m in model.modules():  # non-trivial BatchNorm statistics and relative position biases
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'relative_position_bias_table' in name:
                p.normal_(0, 0.5)
    torch.save({'state_dict': model.state_dict(), 'meta': meta or {}}, path)
    return model


def _export(tmp_path, config, checkpoint, shape, *extra) -> tuple[str, str]:
    out = str(tmp_path / 'model.onnx')
    load_tool('tools/export.py').main([config, str(checkpoint), '--format', 'onnx', '--shape', str(shape[0]),
                                       str(shape[1]), '--out', out, *extra])
    return out


def _run(path: str, x: torch.Tensor) -> list:
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=['CPUExecutionProvider']).run(None, {'input': x.numpy()})


def _compare(module, path, shape, seed=1) -> float:
    x = torch.randn(1, 3, *shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ref = module(x)
    ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
    got = _run(path, x)
    assert len(got) == len(ref)
    return _assert_close(got, [r.numpy() for r in ref])


def _assert_close(got: list, ref: list) -> float:
    result = compare_outputs(got, ref)
    assert result['max_abs_diff'] <= TOL, f'onnxruntime vs PyTorch {describe_comparison(result)} (tolerance {TOL})'
    assert result['argmax_differ'] == result['near_ties'], describe_comparison(result)
    return result['max_abs_diff']


def test_comparison_fails_on_a_wrong_class_map_and_tolerates_near_ties():
    """The check above: a class map off by one channel fails it; argmax flips at near ties within 1e-4 do not."""
    ref = np.random.default_rng(0).normal(size=(1, 5, 8, 8)).astype(np.float32)
    with pytest.raises(AssertionError, match='max \\|diff\\|'):
        _assert_close([np.roll(ref, 1, axis=1)], [ref])
    tied = ref.copy()
    tied[0, 1, 0, 0] = tied[0, :, 0, 0].max() + 2e-5  # channel 1 wins by 2e-5 in the reference ...
    flipped = tied.copy()
    flipped[0, 1, 0, 0] -= 4e-5  # ... and loses by 2e-5 in the output: a 4e-5 error flips it
    result = compare_outputs([flipped], [tied])
    assert result['argmax_differ'] == result['near_ties'] == 1 and _assert_close([flipped], [tied]) <= TOL
    far = tied.copy()
    far[0, 1, 0, 0] -= 1.0  # the same flip from an error of 1.0 is no near tie
    with pytest.raises(AssertionError):
        _assert_close([far], [tied])


def test_tiny_segmentor_matches_pytorch_and_bias_is_constant(tmp_path, capsys):
    cfg = Config.fromfile(TINY_SEG)
    model = _checkpoint(cfg, tmp_path / 'seg.pth')
    path = _export(tmp_path, TINY_SEG, tmp_path / 'seg.pth', (64, 64))
    out = capsys.readouterr().out
    assert re.search(r'onnxruntime vs PyTorch \(fp32, batch 1\): max \|diff\| \S+, argmax identical', out), out
    diff = _compare(export_module(model, 'segmentor', (64, 64)), path, (64, 64))
    print(f'tiny segmentor 64x64: max |diff| {diff:.2e}')
    graph = onnx.load(path).graph
    # the relative position bias is each block's table gathered with a constant index: no resampling or index math
    block_nodes = [n for n in graph.node if '/blocks.' in n.name]
    block_ops = {n.op_type for n in block_nodes}
    assert not block_ops & {'GatherND', 'ScatterND', 'Resize', 'Einsum', 'Where', 'Range'}, block_ops
    assert {'MatMul', 'Softmax', 'Add', 'Gather'} <= block_ops
    initializers = {i.name for i in graph.initializer} | {o for n in graph.node if n.op_type == 'Constant'
                                                          for o in n.output}
    gathers = [n for n in block_nodes if n.op_type == 'Gather']
    assert len(gathers) == 4 and all(n.input[0].endswith('relative_position_bias_table') for n in gathers)
    assert len({n.input[1] for n in gathers}) == 1 and gathers[0].input[1] in initializers  # one shared index
    meta = onnx_metadata(path)
    assert json.loads(meta['beit_mm.shape']) == [1, 3, 64, 64] and meta['beit_mm.kind'] == 'segmentor'
    assert json.loads(meta['mean']) == [123.675, 116.28, 103.53]


def test_export_at_another_grid_equals_on_the_fly_resampling(tmp_path):
    """Exported at 96x64 (grid 6x4, the model's tables are 4x4): equals the unmodified PyTorch model at 96x64,
    which resamples its tables on every forward."""
    cfg = Config.fromfile(TINY_SEG)
    model = _checkpoint(cfg, tmp_path / 'seg.pth')
    path = _export(tmp_path, TINY_SEG, tmp_path / 'seg.pth', (96, 64), '--no-check')
    x = torch.randn(1, 3, 96, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model.decode_head.forward(model.extract_feat(x))
        ref = torch.nn.functional.interpolate(ref, size=(96, 64), mode='bilinear', align_corners=False)
    _assert_close(_run(path, x), [ref.numpy()])
    fixed = export_module(model, 'segmentor', (96, 64)).segmentor.backbone
    assert fixed.grid == (6, 4) and fixed.blocks[0].attn.grid == (6, 4)


def test_beit_b_upernet_512_config_shrunk(tmp_path):
    """configs/beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py (BEiT-B, UPerHead 768 channels) at a 64x64 crop
    (img_size 64, the sizes-only shrink of tests/conftest.py); random weights."""
    cfg = Config.fromfile(BEIT_B_512)
    cfg.model.backbone.img_size = 64
    cfg.model.data_preprocessor.size = (64, 64)
    config = tmp_path / 'beit_b_64.py'
    cfg.dump(str(config))
    model = _checkpoint(cfg, tmp_path / 'b.pth')
    path = _export(tmp_path, str(config), tmp_path / 'b.pth', (64, 64), '--no-check')
    print(f'BEiT-B UPerNet (64x64): max |diff| {_compare(export_module(model, "segmentor", (64, 64)), path, (64, 64)):.2e}')


def test_pyramid_pooling_at_sizes_onnx_cannot_pool_adaptively():
    """UPerNet's PPM scales (1, 2, 3, 6) on a 16x16 map (512 px): the matrix form equals adaptive average pooling."""
    x = torch.randn(2, 5, 16, 16)
    for scale in (1, 2, 3, 6):
        ref = torch.nn.functional.adaptive_avg_pool2d(x, scale)
        assert torch.allclose(MatrixAdaptiveAvgPool2d(scale)(x), ref, atol=1e-6, rtol=0)


def test_cvt_classifier(tmp_path):
    cfg = Config.fromfile(CVT_CLS)
    model = _checkpoint(cfg, tmp_path / 'cvt.pth')
    path = _export(tmp_path, CVT_CLS, tmp_path / 'cvt.pth', (64, 64), '--no-check')
    assert onnx_metadata(path)['beit_mm.kind'] == 'classifier'
    print(f'CvT classifier: max |diff| {_compare(export_module(model, "classifier", (64, 64)), path, (64, 64)):.2e}')


def test_bare_beit_backbone(tmp_path):
    """A MIM config's BEiT (shared relative position bias, final norm) exported alone; also from a backbone-only
    state dict (what tools/convert_checkpoint.py writes)."""
    cfg = Config.fromfile(BEIT_MIM)
    model = _checkpoint(cfg, tmp_path / 'mim.pth')
    torch.save({'state_dict': model.backbone.state_dict()}, tmp_path / 'backbone.pth')
    for ckpt in ('mim.pth', 'backbone.pth'):
        path = _export(tmp_path, BEIT_MIM, tmp_path / ckpt, (64, 64), '--part', 'backbone', '--no-check',
                       '--overwrite')  # the second file replaces the first
        print(f'BEiT backbone ({ckpt}): max |diff| '
              f'{_compare(export_module(model, "backbone", (64, 64)), path, (64, 64)):.2e}')


def test_infer_onnx_equals_infer_with_checkpoint(tmp_path):
    """tools/infer.py --onnx (slide windows in Python around onnxruntime) gives the label maps of tools/infer.py
    with the checkpoint (mmseg's MMSegInferencer), on 80x80 images (2x2 windows of 64 with stride 64 -> overlap)."""
    from mmseg.datasets import ADE20KDataset
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=1, num_val=2, size=80, seed=1)
    val = osp.join(root, 'images', 'validation')
    meta = dict(dataset_meta=dict(classes=ADE20KDataset.METAINFO['classes'], palette=ADE20KDataset.METAINFO['palette']))
    _checkpoint(Config.fromfile(TINY_SEG), tmp_path / 'seg.pth', meta=meta)
    path = _export(tmp_path, TINY_SEG, tmp_path / 'seg.pth', (64, 64), '--no-check')
    ref = infer_images(TINY_SEG, str(tmp_path / 'seg.pth'), [val], str(tmp_path / 'ref'))
    got = infer_onnx(TINY_SEG, path, [val], str(tmp_path / 'onnx'))
    assert ref.keys() == got.keys() and len(got) == 2
    for key in ref:
        assert np.array_equal(ref[key], got[key]), f'{key}: {(ref[key] != got[key]).sum()} pixels differ'
    assert sorted(os.listdir(tmp_path / 'onnx' / 'vis')) == sorted(os.listdir(val))


def test_fix_input_grid_rejects_shapes_off_the_patch_grid():
    model = build_from_config(Config.fromfile(TINY_SEG))
    with pytest.raises(ValueError, match='not divisible by the BEiT patch size 16'):
        fix_input_grid(model, (72, 64))


def _eomt_checkpoint(tmp_path, probs: list[float], meta: dict | None = None) -> tuple[torch.nn.Module, str]:
    model = _checkpoint(Config.fromfile(EOMT_DEMO), tmp_path / 'eomt.pth', meta=meta)
    model.attn_mask_probs.fill_(0.0).add_(torch.tensor(probs))
    torch.save({'state_dict': model.state_dict(), 'meta': meta or {}}, tmp_path / 'eomt.pth')
    return model, str(tmp_path / 'eomt.pth')


@pytest.mark.parametrize('probs', [[0.0, 0.0], [1.0, 1.0]], ids=['annealed', 'masks-on'])
def test_eomt_segmentor_exports_whole_and_matches(tmp_path, probs):
    """EoMT after annealing (no masks) and with masks always on (masks in the graph): onnxruntime equals PyTorch (<=
    1e-4, argmax identical off near ties), and the exported function is the segmentor's encode_decode."""
    model, ckpt = _eomt_checkpoint(tmp_path, probs)
    path = _export(tmp_path, EOMT_DEMO, ckpt, (64, 64), '--no-check')
    module = export_module(model, 'segmentor', (64, 64))
    diff = _compare(module, path, (64, 64))
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():  # the export's eager attention vs the model's SDPA: float32 kernel rounding
        ref = model.encode_decode(x, None)
        assert ref.shape == (1, 150, 64, 64)
        assert_close_to_scale(module(x), ref, what='exported function vs EoMT.encode_decode')
    print(f'EoMT demo 64x64 ({probs}): max |diff| {diff:.2e}')
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert not ops & {'RandomUniform', 'RandomUniformLike'}, ops  # no mask dropping frozen into the graph
    assert ('Greater' in ops) == (probs == [1.0, 1.0]), ops  # the masks are thresholded only when they apply


def test_eomt_mid_annealing_checkpoint_refused(tmp_path):
    """A checkpoint whose masked blocks drop masks at random (0 < probability < 1) is refused, naming the fix."""
    _, ckpt = _eomt_checkpoint(tmp_path, [0.0, 0.5])
    with pytest.raises(SystemExit, match='during mask annealing.*probabilities \\[0.0, 0.5\\].*end_steps'):
        _export(tmp_path, EOMT_DEMO, ckpt, (64, 64))
    assert not osp.exists(tmp_path / 'model.onnx')


def test_eomt_infer_onnx_equals_infer_with_checkpoint(tmp_path):
    """tools/infer.py runs an EoMT config (mmseg's MMSegInferencer around beit_mm.EoMT) and its ONNX export gives the
    same label maps."""
    from mmseg.datasets import ADE20KDataset
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=1, num_val=2, size=80, seed=1)
    val = osp.join(root, 'images', 'validation')
    meta = dict(dataset_meta=dict(classes=ADE20KDataset.METAINFO['classes'], palette=ADE20KDataset.METAINFO['palette']))
    _eomt_checkpoint(tmp_path, [0.0, 0.0], meta=meta)
    path = _export(tmp_path, EOMT_DEMO, tmp_path / 'eomt.pth', (64, 64), '--no-check')
    ref = infer_images(EOMT_DEMO, str(tmp_path / 'eomt.pth'), [val], str(tmp_path / 'ref'))
    got = infer_onnx(EOMT_DEMO, path, [val], str(tmp_path / 'onnx'))
    assert ref.keys() == got.keys() and len(got) == 2
    for key in ref:
        assert np.array_equal(ref[key], got[key]), f'{key}: {(ref[key] != got[key]).sum()} pixels differ'


def test_dinov2_style_eomt_exports_whole_and_matches(tmp_path):
    """EoMT on the DINOv2-style BEiT (registers, patch-only position embedding; the config HF's EoMT weights load
    into), masks on: onnxruntime equals PyTorch (<= 1e-4, argmax identical off near ties)."""
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'eomt', 'eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py'))
    cfg.model.backbone.update(arch=dict(embed_dims=64, num_layers=4, num_heads=4, mlp_ratio=4.0), img_size=64,
                              init_cfg=None)
    cfg.model.update(num_classes=7, num_queries=10, num_blocks=2,
                     mask_annealing=dict(start_steps=[1, 2], end_steps=[2, 3]))  # probabilities stay 1: masks on
    cfg_path = tmp_path / 'dinov2_tiny.py'
    cfg.dump(str(cfg_path))
    model = _checkpoint(cfg, tmp_path / 'eomt.pth')
    with torch.no_grad():
        model.backbone.reg_token.normal_()  # registers that matter
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, tmp_path / 'eomt.pth')
    path = _export(tmp_path, str(cfg_path), tmp_path / 'eomt.pth', (64, 64), '--no-check')
    diff = _compare(export_module(model, 'segmentor', (64, 64)), path, (64, 64))
    print(f'DINOv2-style EoMT 64x64 (masks on): max |diff| {diff:.2e}')
