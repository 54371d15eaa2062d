"""beit_mm.PortableMSDeformAttn against mmcv 2.1.0 (installed): the module against mmcv's MultiScaleDeformableAttention
on its PyTorch function (``multi_scale_deformable_attn_pytorch``) with the same weights, outputs <= 1e-6 and gradients
<= 1e-5 in fp32 on the shipped configs' head/level/point layouts; mmcv-layout state_dicts load strictly both ways; the
kernel follows the probe of the installed build, not the tensor's device."""
import copy

import pytest
import torch
from mmcv.ops import MultiScaleDeformableAttention
from mmdet.models.layers import MSDeformAttnPixelDecoder
from mmengine.config import ConfigDict

from beit_mm.models.layers import ms_deform_attn, vit_adapter
from beit_mm.models.layers.ms_deform_attn import (PortableMSDeformAttn, PortableMSDeformAttnPixelDecoder,
                                                  compiled_kernel_runs)
from beit_mm.registry import MODELS

CPU = torch.device('cpu')
# name -> (constructor kwargs, query count, level shapes (h, w), reference points' last dim). Widths, heads, levels,
# points and value ratio are the shipped configs'; the maps are those of a 64- or 128-px input (the sampling is per
# pixel).
LAYOUTS = {
    # ViT-Adapter-B injector: ViT tokens (16 px) attend to the stride-8/16/32 prior (configs/_base_/models/
    # mask2former_beit-adapter-base.py: deform_num_heads=12, n_points=4, deform_ratio=0.5)
    'adapter-base-injector': (dict(embed_dims=768, num_heads=12, num_levels=3, num_points=4, value_proj_ratio=0.5),
                              64, [(16, 16), (8, 8), (4, 4)], 2),
    # ViT-Adapter-B extractor: the prior's 336 tokens attend to the ViT's one level
    'adapter-base-extractor': (dict(embed_dims=768, num_heads=12, num_levels=1, num_points=4, value_proj_ratio=0.5),
                               84, [(4, 4)], 2),
    # ViT-Adapter-L (configs/_base_/models/upernet_beit-adapter-large.py: 16 heads over 1024)
    'adapter-large-injector': (dict(embed_dims=1024, num_heads=16, num_levels=3, num_points=4, value_proj_ratio=0.5),
                               16, [(8, 8), (4, 4), (2, 2)], 2),
    # Mask2Former pixel decoder (configs/_base_/models/mask2former_beit.py): 3 levels at strides 8/16/32
    'mask2former-pixel-decoder': (dict(embed_dims=256, num_heads=8, num_levels=3, num_points=4), 336,
                                  [(16, 16), (8, 8), (4, 4)], 2),
    # the large ViT-Adapter Mask2Former's decoder width (configs/vit_adapter/mask2former_beit-adapter-large_*)
    'mask2former-large-pixel-decoder': (dict(embed_dims=1024, num_heads=32, num_levels=3, num_points=4), 84,
                                        [(8, 8), (4, 4), (2, 2)], 2),
    # mmcv's other conventions: sequence first, box references
    'sequence-first-boxes': (dict(embed_dims=64, num_heads=4, num_levels=2, num_points=2, batch_first=False), 20,
                             [(6, 10), (3, 5)], 4),
}


def _pair(kwargs: dict) -> tuple[MultiScaleDeformableAttention, PortableMSDeformAttn]:
    kwargs = dict(dict(dropout=0.0, batch_first=True), **kwargs)
    torch.manual_seed(0)
    ref = MultiScaleDeformableAttention(**kwargs)
    for p in ref.parameters():  # off mmcv's init (zero attention logits), so the sampling matters
        p.data.normal_(0.0, 0.05)
    ours = PortableMSDeformAttn(**kwargs)
    ours.load_state_dict(ref.state_dict(), strict=True)
    return ref, ours


def _inputs(kwargs: dict, n_q: int, shapes: list, ref_dims: int, batch: int = 2) -> dict:
    spatial = torch.tensor(shapes)
    start = torch.cat([spatial.new_zeros(1), spatial.prod(1).cumsum(0)[:-1]])
    c, n_v = kwargs['embed_dims'], int(spatial.prod(1).sum())
    first = (batch, n_q) if kwargs.get('batch_first', True) else (n_q, batch)
    value_first = (batch, n_v) if kwargs.get('batch_first', True) else (n_v, batch)
    points = torch.rand(batch, n_q, len(shapes), ref_dims)
    return dict(query=torch.randn(*first, c, requires_grad=True),
                value=torch.randn(*value_first, c, requires_grad=True), query_pos=torch.randn(*first, c),
                reference_points=points, spatial_shapes=spatial, level_start_index=start,
                key_padding_mask=torch.rand(batch, n_v) < 0.1)


@pytest.mark.parametrize('layout', sorted(LAYOUTS))
def test_outputs_and_gradients_equal_mmcv_pytorch_function(layout):
    kwargs, n_q, shapes, ref_dims = LAYOUTS[layout]
    ref, ours = _pair(kwargs)
    torch.manual_seed(1)
    x = _inputs(kwargs, n_q, shapes, ref_dims)
    y = {k: v.detach().clone().requires_grad_(v.requires_grad) for k, v in x.items()}
    want, got = ref(**x), ours(**y)
    assert (got - want).abs().max() <= 1e-6, layout
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad)
    for name in ('query', 'value'):
        assert (y[name].grad - x[name].grad).abs().max() <= 1e-5, (layout, name)
    for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
        assert (q.grad - p.grad).abs().max() <= 1e-5, (layout, name)


def test_vit_adapter_state_dict_loads_strictly_both_ways(monkeypatch):
    """The adapter built with ours and with mmcv's class: one layout (released ViT-Adapter files load unchanged)."""
    cfg = dict(type='beit_mm.BEiTAdapter', arch=dict(embed_dims=96, num_layers=4, num_heads=3, mlp_ratio=4.0),
               img_size=64, conv_inplane=16, n_points=4, deform_num_heads=3, deform_ratio=0.5,
               interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]], norm_cfg=dict(type='BN'))
    ours = MODELS.build(cfg)
    assert sum(isinstance(m, PortableMSDeformAttn) for m in ours.modules()) == 4 + 4 + 2  # injectors, extractors
    monkeypatch.setattr(vit_adapter, 'PortableMSDeformAttn', MultiScaleDeformableAttention)
    mmcv_built = MODELS.build(cfg)
    assert not any(isinstance(m, PortableMSDeformAttn) for m in mmcv_built.modules())
    mmcv_built.load_state_dict(ours.state_dict(), strict=True)
    ours.load_state_dict(mmcv_built.state_dict(), strict=True)


def test_mask2former_pixel_decoder_is_mmdets_with_ours_inside():
    """mmdet's MSDeformAttnPixelDecoder and ours from one config: the same keys and, from one seed, the same weights
    and outputs; the encoder's attentions are ours."""
    cfg = ConfigDict(in_channels=[32] * 4, strides=[4, 8, 16, 32], feat_channels=32, out_channels=32, num_outs=3,
               norm_cfg=dict(type='GN', num_groups=8),
               encoder=dict(num_layers=2, layer_cfg=dict(
                   self_attn_cfg=dict(embed_dims=32, num_heads=4, num_levels=3, num_points=4, dropout=0.0,
                                      batch_first=True),
                   ffn_cfg=dict(embed_dims=32, feedforward_channels=64, num_fcs=2, ffn_drop=0.0))),
               positional_encoding=dict(num_feats=16, normalize=True))
    torch.manual_seed(0)
    theirs = MSDeformAttnPixelDecoder(**cfg)
    torch.manual_seed(0)
    ours = MODELS.build(ConfigDict(type='beit_mm.PortableMSDeformAttnPixelDecoder', **cfg))
    assert isinstance(ours, PortableMSDeformAttnPixelDecoder)
    assert all(type(layer.self_attn) is PortableMSDeformAttn for layer in ours.encoder.layers)
    for (name, p), q in zip(theirs.state_dict().items(), ours.state_dict().values()):
        assert torch.equal(p, q), name
    theirs.load_state_dict(ours.state_dict(), strict=True)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    feats = [torch.randn(2, 32, 64 // s, 64 // s) for s in (4, 8, 16, 32)]
    for want, got in zip(theirs(feats)[1], ours(feats)[1]):
        assert (got - want).abs().max() <= 1e-6


def test_mmcv_has_no_cpu_kernel_and_the_probe_says_so(monkeypatch):
    """The fact the choice rests on: mmcv's compiled function on CPU tensors raises; the probe reports it missing."""
    monkeypatch.setattr(ms_deform_attn, '_COMPILED_RUNS', {})
    value = torch.ones(1, 1, 1, 1)
    one = torch.ones(1, 1, 1, 1, 1)
    with pytest.raises(RuntimeError, match='implementation for device cpu not found'):
        ms_deform_attn.MultiScaleDeformableAttnFunction.apply(value, torch.ones(1, 2, dtype=torch.long),
                                                              torch.zeros(1, dtype=torch.long),
                                                              torch.full((1, 1, 1, 1, 1, 2), 0.5), one, 1)
    assert not compiled_kernel_runs(CPU, torch.float32)
    assert ms_deform_attn._COMPILED_RUNS == {('cpu', torch.float32): False}


def _spy(monkeypatch) -> list:
    calls = []
    compiled = ms_deform_attn.MultiScaleDeformableAttnFunction
    pytorch = ms_deform_attn.multi_scale_deformable_attn_pytorch

    class Compiled:
        @staticmethod
        def apply(*args):
            calls.append('compiled')
            return compiled.apply(*args)

    def in_pytorch(*args):
        calls.append('pytorch')
        return pytorch(*args)

    monkeypatch.setattr(ms_deform_attn, 'MultiScaleDeformableAttnFunction', Compiled)
    monkeypatch.setattr(ms_deform_attn, 'multi_scale_deformable_attn_pytorch', in_pytorch)
    return calls


def test_with_the_compiled_kernel_reported_missing_the_pytorch_path_trains(monkeypatch):
    """A device whose probe found no kernel runs forward and backward in PyTorch."""
    monkeypatch.setattr(ms_deform_attn, '_COMPILED_RUNS', {('cpu', torch.float32): False})
    calls = _spy(monkeypatch)
    kwargs, n_q, shapes, ref_dims = LAYOUTS['mask2former-pixel-decoder']
    _, ours = _pair(kwargs)
    ours(**_inputs(kwargs, n_q, shapes, ref_dims, batch=1)).sum().backward()
    assert calls == ['pytorch']
    assert all(p.grad is not None for p in ours.parameters())


def test_with_the_compiled_kernel_reported_present_it_is_called(monkeypatch):
    """The choice follows the probe's answer for the device type and dtype, whatever the device."""
    calls = _spy(monkeypatch)
    answers = {('cpu', torch.float32): True, ('cpu', torch.float64): False}
    monkeypatch.setattr(ms_deform_attn, '_COMPILED_RUNS', answers)
    value = torch.randn(1, 4, 2, 8)
    args = (value, torch.tensor([[2, 2]]), torch.tensor([0]), torch.rand(1, 3, 2, 1, 2, 2), torch.rand(1, 3, 2, 1, 2))
    with pytest.raises(RuntimeError, match='implementation for device cpu not found'):
        ms_deform_attn.ms_deform_attn(*args)
    assert calls == ['compiled']
    doubled = (a.double() if a.is_floating_point() else a for a in args)
    assert ms_deform_attn.ms_deform_attn(*doubled).shape == (1, 3, 16)
    assert calls == ['compiled', 'pytorch']  # the answer is per dtype


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_on_cuda_the_probe_follows_the_build_and_the_module_trains():
    """On a GPU: the compiled kernel is chosen exactly when mmcv was built with CUDA ops; either way forward and
    backward run and equal the CPU module's (1e-4: the compiled kernel sums in another order)."""
    from mmcv.ops import get_compiling_cuda_version
    cuda = torch.device('cuda')
    assert compiled_kernel_runs(cuda, torch.float32) == (get_compiling_cuda_version() != 'not available')
    kwargs, n_q, shapes, ref_dims = LAYOUTS['mask2former-pixel-decoder']
    _, ours = _pair(kwargs)
    torch.manual_seed(1)
    x = _inputs(kwargs, n_q, shapes, ref_dims)
    y = {k: v.detach().to(cuda).requires_grad_(v.requires_grad) for k, v in x.items()}
    want, got = ours(**x), copy.deepcopy(ours).to(cuda)(**y)
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(y['value'].grad.cpu(), x['value'].grad, atol=1e-4, rtol=1e-4)
