"""Every model compiles whole: ``torch.compile(fullgraph=True, dynamic=False)`` through ``compile_model``, forward and
backward equal to eager within ``FP32_KERNEL_RTOL``, and no recompilation on a second batch with another mask. The
backend is ``aot_eager`` (whole-graph capture and the traced backward without inductor's code generation)."""
import copy

import pytest
import torch
import torch._dynamo
from mmengine.registry import init_default_scope

from beit_mm.engine.compile import compile_model, compile_units
from beit_mm.models.backbones import BEiT
from beit_mm.models.selfsup import BEiTPretrain
from beit_mm.registry import MODELS

from . import test_beit2_mim, test_eomt, test_mim, test_vqkd
from ..conftest import assert_close_to_scale, randomize_

BACKEND = 'aot_eager'


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _step(model, call):
    """One forward + backward: the outputs (a dict, tuple or tensor, flattened) and every gradient."""
    model.zero_grad(set_to_none=True)
    out = call(model)
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else [out]
    values = [v for v in values if isinstance(v, torch.Tensor)]
    loss = sum(v.float().square().mean() if not v.requires_grad or v.dim() else v for v in values if v.requires_grad)
    loss.backward()
    return [v.detach().clone() for v in values], _grads(model)


def check_compiles_whole(model, calls, scope='model', stable_from=1):
    """Eager vs compiled copy on each call of ``calls``: equal outputs and gradients; the calls from ``stable_from``
    on (another batch, another mask, the same shapes) must not recompile."""
    compiled = copy.deepcopy(model)
    units = compile_model(compiled, scope, backend=BACKEND)
    assert units
    for i, call in enumerate(calls):
        torch.manual_seed(i)
        ref_out, ref_grads = _step(model, call)
        torch.manual_seed(i)
        with torch._dynamo.config.patch(error_on_recompile=i >= stable_from):
            out, grads = _step(compiled, call)
        assert len(out) == len(ref_out)
        for j, (a, b) in enumerate(zip(out, ref_out)):
            assert_close_to_scale(a.float(), b.float(), what=f'call {i} output {j}')
        assert grads.keys() == ref_grads.keys() and grads
        for name in ref_grads:
            assert_close_to_scale(grads[name], ref_grads[name], what=f'call {i} {name}.grad')


def _other_mask(inputs):
    out = dict(inputs)
    out['mask'] = torch.zeros_like(inputs['mask'])
    out['mask'][:, 1:3, :] = True
    return out


@pytest.mark.parametrize('layout', ['shared', 'per-layer'])
def test_beit_backbone_masked_and_plain(layout):
    """BEiT with the pretraining layout (shared bias, masked input) and the fine-tuning one (per-block bias)."""
    kw = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=4, mlp_ratio=2.0), img_size=32, patch_size=8,
              use_rel_pos_bias=layout == 'per-layer', use_shared_rel_pos_bias=layout == 'shared',
              with_mask_token=True, final_norm=True, drop_path_rate=0.1, out_indices=(0, 1))
    model = randomize_(BEiT(**kw)).train()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 32, 32, generator=g)
    masks = [torch.rand(2, 4, 4, generator=g) < p for p in (0.4, 0.6)]
    check_compiles_whole(model, [lambda m, k=k: m(x + k, masks[k]) for k in range(2)])


def test_beit_v1_mim_step(tmp_path):
    """BEiT v1 MIM: DALL-E targets, the static masked cross-entropy, accuracy and its baseline."""
    model, _ = test_mim.build_tiny(tmp_path)
    inputs = test_mim.make_inputs()
    check_compiles_whole(model.train(), [lambda m: m(inputs, mode='loss'),
                                         lambda m: m(_other_mask(test_mim.make_inputs(seed=1)), mode='loss')])


def test_beit_v2_mim_step():
    """BEiT v2 MIM: cls-token pretraining layers, the shared lm_head on both token sets, VQ-KD targets."""
    torch.manual_seed(0)
    cfg = test_beit2_mim.v2_cfg()
    cfg['target_generator'] = dict(type='beit_mm.VQKD', arch=test_vqkd.SMALL, with_decoder=False)
    cfg['head']['vocab_size'] = test_vqkd.SMALL['num_codes']
    model = BEiTPretrain(**cfg)
    model.init_weights()
    model.target_generator.quantize.embedding.initted.fill_(1.0)
    model.target_generator.quantize.embedding.weight.normal_()
    g = torch.Generator().manual_seed(1)

    def batch(mask_rows):
        mask = torch.zeros(2, 4, 4, dtype=torch.bool)
        mask[:, mask_rows] = True
        return dict(images=torch.randn(2, 3, 32, 32, generator=g), mask=mask,
                    target_images=torch.rand(2, 3, 32, 32, generator=g) * 255)

    batches = [batch(slice(0, 2)), batch(slice(1, 4))]
    check_compiles_whole(model.train(), [lambda m, b=b: m(b, mode='loss') for b in batches])


def test_pixel_target_mim_step():
    from .test_mim_ablations import make_inputs, pixel_cfg
    torch.manual_seed(0)
    model = BEiTPretrain(**pixel_cfg())
    model.init_weights()
    inputs = make_inputs()
    check_compiles_whole(model.train(), [lambda m: m(inputs, mode='loss'),
                                         lambda m: m(_other_mask(inputs), mode='loss')])


def test_vqkd_training_step():
    """VQ-KD training: teacher, encoder, quantizer (k-means init on the first call, EMA update, dead-code re-seeding)
    and decoder; the codebook buffers after each step equal eager's too."""
    model = test_vqkd.small_vqkd(dead_code_ratio=0.5).train()
    imgs = [test_vqkd.images(seed=s) for s in (0, 1, 2)]
    compiled = copy.deepcopy(model)
    compile_model(compiled, backend=BACKEND)
    for i, x in enumerate(imgs):
        torch.manual_seed(i)
        ref_out, ref_grads = _step(model, lambda m: m(x, mode='loss'))
        torch.manual_seed(i)
        # call 0 initializes the codebook (k-means) and re-traces once without it at call 1; then no recompilation
        with torch._dynamo.config.patch(error_on_recompile=i > 1):
            out, grads = _step(compiled, lambda m: m(x, mode='loss'))
        for a, b in zip(out, ref_out):
            assert_close_to_scale(a, b, what=f'step {i} loss')
        for name in ref_grads:
            assert_close_to_scale(grads[name], ref_grads[name], what=f'step {i} {name}.grad')
        for name, buf in model.quantize.named_buffers():
            assert_close_to_scale(dict(compiled.quantize.named_buffers())[name], buf, what=f'step {i} {name}')


@pytest.fixture
def tiny_upernet():
    from mmengine.config import Config
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    import os.path as osp
    init_default_scope('mmseg')
    cfg = Config.fromfile(osp.join(osp.dirname(osp.dirname(__file__)), 'configs', 'tiny_beit_upernet_ade_demo.py'))
    cfg.model.neck.norm_cfg = cfg.model.decode_head.norm_cfg = dict(type='BN', requires_grad=True)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()

    def batch(seed):
        g = torch.Generator().manual_seed(seed)
        samples = []
        for _ in range(2):
            s = SegDataSample(gt_sem_seg=PixelData(data=torch.randint(0, 150, (1, 64, 64), generator=g)))
            s.set_metainfo(dict(img_shape=(64, 64), pad_shape=(64, 64), ori_shape=(64, 64)))
            samples.append(s)
        return torch.randn(2, 3, 64, 64, generator=g), samples

    return model, batch


def test_upernet_segmentor_loss(tiny_upernet):
    """mmseg's EncoderDecoder with BEiT, Feature2Pyramid and UPerHead: the loss (cross-entropy and mmseg's
    accuracy) and the backward, compiled whole."""
    model, batch = tiny_upernet
    batches = [batch(0), batch(1)]
    check_compiles_whole(model.train(), [lambda m, b=b: m(*b, mode='loss') for b in batches])


@pytest.mark.parametrize('train', [True, False])
def test_eomt_network(train):
    """EoMT's prediction network (its ``compile_units``): masked attention while annealing (a draw against the
    block's probability) in training, the annealed blocks skipped in eval; the matching loss stays eager."""
    model = test_eomt.tiny_eomt().train(train)
    model.set_annealing_step(3)  # block 0 annealing (a draw), block 1 still masking (no draw)
    assert model.mask_phases() == ('draw', 'keep')
    assert compile_units(model) == [model.predictions]
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(2, 3, 32, 32, generator=g) for _ in range(2)]
    if train:
        calls = [lambda m, x=x, s=test_eomt.samples(): m.loss(x, s) for x in xs]
    else:
        calls = [lambda m, x=x: m.forward_predictions(x)[0] + m.forward_predictions(x)[1] for x in xs]
    check_compiles_whole(model, calls)


def test_eomt_annealing_phase_change_retraces_once():
    model = test_eomt.tiny_eomt().eval()
    compile_model(model, backend=BACKEND)
    x = torch.randn(1, 3, 32, 32)
    model.set_annealing_step(3)
    model.forward_predictions(x)
    model.set_annealing_step(5)  # block 0 annealed: skipped in eval, block 1 drawing
    assert model.mask_phases() == ('off', 'draw')
    assert len(model.forward_predictions(x)[0]) == 2  # block 1's and the output's
    with torch._dynamo.config.patch(error_on_recompile=True):
        model.set_annealing_step(5)
        model.forward_predictions(x + 1)


def test_blocks_scope_compiles_each_transformer_block():
    model = randomize_(BEiT(arch=dict(embed_dims=32, num_layers=3, num_heads=4, mlp_ratio=2.0), img_size=32,
                            patch_size=8, drop_path_rate=0.0))
    units = compile_units(model, 'blocks')
    assert units == list(model.blocks)
    x = torch.randn(2, 3, 32, 32)
    check_compiles_whole(model, [lambda m: m(x), lambda m: m(x + 1)], scope='blocks')


def test_compile_settings_refuse_unknown_scope():
    from beit_mm.engine.compile import compile_settings
    with pytest.raises(ValueError, match=r"scope='graph'\) is not one of"):
        compile_settings(dict(scope='graph'))
    with pytest.raises(ValueError, match='list of device types'):
        compile_settings(dict(devices='cuda'))
    assert compile_settings(True) == dict(scope='model', devices=('cuda', ))
    assert compile_settings(False) is None


def test_cvt_mim_step():
    """CvT as the MIM backbone (mask token at the stage-0 embedding, convolutional projections)."""
    from . import test_cvt_mim
    model = test_cvt_mim.build().train()
    batches = [test_cvt_mim.make_inputs(seed=s) for s in (0, 1)]
    batches[1]['mask'] = torch.roll(batches[1]['mask'], 1, dims=2)
    check_compiles_whole(model, [lambda m, b=b: m(b, mode='loss') for b in batches])


def test_image_classifier_fine_tuning_step():
    """mmpretrain's ImageClassifier with BEiT (per-block bias, drop path), the mean-pool neck and LinearClsHead with
    label smoothing on the soft labels that Mixup/CutMix give, as the fine-tuning recipe."""
    from mmpretrain.structures import DataSample
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='beit_mm.BEiT', arch=dict(embed_dims=32, num_layers=2, num_heads=4, mlp_ratio=2.0),
                      img_size=32, patch_size=8, drop_path_rate=0.1, out_indices=(-1, )),
        neck=dict(type='beit_mm.MeanPoolNeck', in_channels=32),
        head=dict(type='LinearClsHead', num_classes=10, in_channels=32,
                  loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'))))
    model.init_weights()
    g = torch.Generator().manual_seed(1)

    def batch():
        samples = [DataSample().set_gt_score(torch.rand(10, generator=g).softmax(0)) for _ in range(2)]
        return torch.randn(2, 3, 32, 32, generator=g), samples

    batches = [batch(), batch(), batch()]
    check_compiles_whole(model.train(), [lambda m, b=b: m(*b, mode='loss') for b in batches], stable_from=2)
