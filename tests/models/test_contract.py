"""One contract over every registered model part, as timm's ``tests/test_models.py``.

Backbones (every class registered from ``beit_mm.models.backbones``): builds by its registry name; maps at two input
sizes (one non-square) with one stride per level; SDPA and eager attention give the same outputs and gradients; so does
activation checkpointing (``with_cp``); ``get_layer_depth`` gives every parameter an id; the masked forward where the
class has a mask token. Converters (every module of ``beit_mm.converters`` that converts weights): the output loads
strictly into a tiny model and equals it, through the inverse where one exists. Target generators, heads and necks
build and run. Each registered class needs a row in its table below: a new one fails here until it has one.
Reference parity and behaviour the contract cannot see live in the per-model test files.
"""
from __future__ import annotations

import inspect
import os.path as osp
import pkgutil

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

import beit_mm.converters
from beit_mm.converters.beit import beit_to_hf, beit_to_timm, convert_beit
from beit_mm.converters.cvt import convert_cvt, cvt_to_hf
from beit_mm.converters.dalle import convert_dalle
from beit_mm.converters.dinov2 import convert_dinov2
from beit_mm.converters.dinov3 import official_dinov3_to_beit_mm
from beit_mm.converters.dvae import extract_dvae_encoder
from beit_mm.converters.eomt import beit_mm_to_hf_eomt, hf_eomt_to_beit_mm
from beit_mm.converters.pmt import pmt_to_beit_mm
from beit_mm.converters.upernet import segmentor_from_hf, segmentor_to_hf
from beit_mm.converters.vit_adapter import convert_vit_adapter
from beit_mm.converters.vqkd import convert_dino_vit, convert_vqkd
from beit_mm.registry import MODELS

from ..conftest import ROOT, assert_close_to_scale, randomize_

SIZES = [(64, 64), (64, 96)]  # one square, one not; every backbone's strides divide both
VIT = dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0)
MASK_AT_PATCHES = lambda m, hw: (hw[0] // 16, hw[1] // 16)  # noqa: E731
# One row per registered backbone: a tiny config, the strides of its maps, the grid its mask replaces for an (H, W)
# input (None: no mask token), and layer ids of a few parameters with the number of ids.
BACKBONES = {
    'BEiT': (dict(arch=VIT, img_size=64, use_abs_pos_emb=True, out_indices=(0, 1), final_norm=True,
                  drop_path_rate=0.0), (16, 16), MASK_AT_PATCHES,
             # unilm: embeddings 0, block i -> i + 1, a shared bias and the final norm -> num_layers + 1
             ({'cls_token': 0, 'mask_token': 0, 'pos_embed': 0, 'patch_embed.proj.weight': 0,
               'blocks.0.attn.qkv.weight': 1, 'blocks.1.gamma_2': 2, 'rel_pos_bias.relative_position_bias_table': 3,
               'norm.weight': 3}, 4)),
    'BEiTAdapter': (dict(arch=dict(VIT, num_layers=4), img_size=64, conv_inplane=8, n_points=2, deform_num_heads=2,
                         deform_ratio=0.5, interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]],
                         norm_cfg=dict(type='BN'), drop_path_rate=0.0), (4, 8, 16, 32), None,
                    # ViT-Adapter's get_num_layer_for_vit (czczup/ViT-Adapter@fd64a51 segmentation/mmcv_custom/
                    # layer_decay_optimizer_constructor.py:21-44): the adapter's own names -> num_layers + 1
                    ({'cls_token': 0, 'patch_embed.proj.weight': 0, 'blocks.0.attn.qkv.weight': 1,
                      'blocks.3.gamma_2': 4, 'level_embed': 5, 'spm.stem.0.weight': 5, 'interactions.0.injector.gamma': 5,
                      'interactions.3.extra_extractors.1.ffn.fc1.weight': 5, 'up.weight': 5, 'norm4.weight': 5}, 6)),
    'CvT': (dict(arch=dict(embed_dims=[16, 24, 32], depths=[1, 1, 2], num_heads=[1, 2, 2]), drop_path_rate=0.0,
                 out_indices=(0, 1, 2, 3)), (4, 8, 16, 32), lambda m, hw: m.stage0_grid(hw),
            # mmpretrain's hierarchical rule: stage s embedding -> sum(depths[:s]), its block j -> that + j + 1
            ({'stage0.patch_embed.proj.weight': 0, 'stage0.mask_token': 0,
              'stage0.blocks.0.attn.conv_proj_q.bn.weight': 1, 'stage1.patch_embed.norm.bias': 1,
              'stage1.blocks.0.mlp.fc1.weight': 2, 'stage2.patch_embed.proj.weight': 2, 'stage2.cls_token': 2,
              'stage2.blocks.1.attn.proj.bias': 4, 'norm.weight': 5, 'stage3.blocks.0.norm1.weight': 5}, 6)),
    'DINOv3': (dict(arch=VIT, img_size=64, num_register_tokens=2, out_indices=(0, 1), rope_rescale_coords=None),
               (16, 16), MASK_AT_PATCHES,
               ({'cls_token': 0, 'reg_token': 0, 'mask_token': 0, 'patch_embed.proj.weight': 0, 'blocks.1.gamma_1': 2,
                 'norm.weight': 3}, 4)),
}


def registered(package: str) -> list[str]:
    """The names registered in beit_mm's MODELS by classes of ``beit_mm.models.<package>``."""
    MODELS.import_from_location()
    return sorted(name for name, cls in MODELS.module_dict.items()
                  if cls.__module__.startswith(f'beit_mm.models.{package}.'))


def twin(model: torch.nn.Module, name: str, **overrides) -> torch.nn.Module:
    """A backbone built with ``overrides`` holding ``model``'s weights (its state dict: not its derived buffers)."""
    other = MODELS.build(dict(type=f'beit_mm.{name}', **{**BACKBONES[name][0], **overrides}))
    other.load_state_dict(model.state_dict(), strict=True)
    return other.train(model.training)


def build(name: str, **overrides) -> torch.nn.Module:
    """The row's backbone with random weights, built by its registry name."""
    torch.manual_seed(0)
    model = MODELS.build(dict(type=f'beit_mm.{name}', **{**BACKBONES[name][0], **overrides}))
    return twin(randomize_(model, std=0.1), name, **overrides)


def step(model: torch.nn.Module, x: torch.Tensor, **kw) -> list[torch.Tensor]:
    """Outputs and every parameter's gradient of one forward and backward."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same drop-path draws
    outs = model(x, **kw)
    sum((o * torch.linspace(-1, 1, o.numel()).view_as(o)).sum() for o in outs).backward()
    return [o.detach() for o in outs] + [p.grad for p in model.parameters() if p.requires_grad]


def test_every_registered_backbone_has_a_row():
    assert registered('backbones') == sorted(BACKBONES)


@pytest.fixture(params=sorted(BACKBONES))
def name(request) -> str:
    return request.param


def test_builds_and_maps_at_two_sizes(name):
    model = build(name).eval()
    assert type(model).__name__ == name  # registry name = class name
    shapes = []
    for h, w in SIZES:
        with torch.no_grad():
            outs = model(torch.randn(2, 3, h, w))
        assert isinstance(outs, tuple) and outs and all(o.dim() == 4 and o.isfinite().all() for o in outs)
        assert all(h % o.shape[2] == 0 and h // o.shape[2] == w // o.shape[3] for o in outs), [o.shape for o in outs]
        shapes.append([(o.shape[0], o.shape[1], h // o.shape[2]) for o in outs])  # batch, channels, stride
    assert shapes[0] == shapes[1] and all(b == 2 for b, _, _ in shapes[0])
    assert tuple(s for _, _, s in shapes[0]) == BACKBONES[name][1]


def test_sdpa_and_eager_attention_agree(name):
    """``attn_impl`` is every backbone's switch; outputs and gradients agree in fp32 (eval mode: BatchNorm on batch
    statistics of a few tokens would amplify the kernels' rounding)."""
    sdpa = build(name, attn_impl='sdpa').eval()
    eager = twin(sdpa, name, attn_impl='eager')
    x = torch.randn(2, 3, *SIZES[1])
    for a, b in zip(step(sdpa, x), step(eager, x)):
        assert_close_to_scale(a, b, what=f'{name} sdpa vs eager')


def test_activation_checkpointing_computes_the_same(name):
    """``with_cp`` in training with drop path on: the same outputs, gradients and BatchNorm statistics."""
    plain = build(name, drop_path_rate=0.1).train()
    ckpt = twin(plain, name, with_cp=True, drop_path_rate=0.1)
    x = torch.randn(2, 3, *SIZES[1])
    for a, b in zip(step(plain, x), step(ckpt, x)):
        assert_close_to_scale(a, b, rtol=1e-6, what=f'{name} with_cp')
    for (key, a), b in zip(plain.state_dict().items(), ckpt.state_dict().values()):
        assert torch.equal(a, b), key  # BatchNorm statistics moved once


def test_layer_depth_for_every_parameter(name):
    """The ids of the row; every parameter's in [0, n), n - 1 outside the prefix."""
    model = build(name)
    expected, num_ids = BACKBONES[name][3]
    for param, layer_id in expected.items():
        assert model.get_layer_depth(f'backbone.{param}', 'backbone.') == (layer_id, num_ids), param
        assert model.get_layer_depth(param) == (layer_id, num_ids), param
    depths = [model.get_layer_depth(f'backbone.{p}', 'backbone.') for p, _ in model.named_parameters()]
    n = depths[0][1]
    assert all(d[1] == n and 0 <= d[0] < n for d in depths)
    ids = [d[0] for d in depths]
    assert len(set(ids)) > 2 and min(ids) == 0
    assert model.get_layer_depth('decode_head.conv_seg.weight', 'backbone.') == (n - 1, n)


def test_masked_forward(name):
    """An all-False mask changes nothing; a mask replaces tokens by ``mask_token``, which then gets a gradient."""
    grid = BACKBONES[name][2]
    if grid is None:
        assert 'with_mask_token' not in inspect.signature(MODELS.get(name)).parameters
        pytest.skip(f'{name} has no mask token')
    model = build(name, with_mask_token=True).eval()
    x = torch.randn(2, 3, *SIZES[1])
    none = torch.zeros(2, *grid(model, SIZES[1]), dtype=torch.bool)
    some = torch.rand(none.shape, generator=torch.Generator().manual_seed(0)) < 0.4
    plain = model(x)
    for a, b in zip(plain, model(x, none)):
        assert torch.equal(a, b)
    masked = model(x, some)
    assert not torch.allclose(masked[-1], plain[-1])
    masked[-1].square().sum().backward()
    mask_tokens = [p for n, p in model.named_parameters() if n.endswith('mask_token')]
    assert len(mask_tokens) == 1 and mask_tokens[0].grad.abs().sum() > 0


# ---------------------------------------------------------------------------- target generators, heads and necks
def _images(scale: float = 1.0) -> torch.Tensor:
    return scale * torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def _targets(m) -> torch.Tensor:  # the MIM target interface: both views of a 32 px batch
    return m.get_targets({'images': _images(), 'target_images': _images(255.0)})


MASK = torch.tensor([[True, False, True, False], [False, True, True, True]])  # (B, N): 2x2 patches of 16 px
TINY_DALLE = dict(group_count=2, n_hid=8, n_blk_per_group=1, vocab_size=16)
VQKD_ARCH = dict(encoder=VIT, decoder=dict(VIT, num_layers=1), img_size=32, patch_size=16, num_codes=16, code_dims=8,
                 out_dims=16)
# registered name -> (tiny config, a call of its interface returning tensors)
PARTS = {
    'BEiTMIMHead': (dict(embed_dims=32, vocab_size=16),
                    lambda m: m.loss(torch.randn(2, 4, 32), torch.randint(0, 16, (2, 4)), MASK)),
    'PixelRegressionHead': (dict(embed_dims=32, patch_size=16),
                            lambda m: m.loss(torch.randn(2, 4, 32), torch.randn(2, 4, 768), MASK)),
    'MeanPoolNeck': (dict(in_channels=32), lambda m: m((torch.randn(2, 32, 2, 3), torch.randn(2, 32, 4, 6)))),
    'DALLEEncoder': (TINY_DALLE, _targets),
    'DVAE': (dict(TINY_DALLE, decoder_n_init=8), lambda m: m(_images(), mode='loss')),
    'PatchPixelTarget': (dict(patch_size=16), _targets),
    'VQKD': (dict(arch=VQKD_ARCH, kmeans_init=False), _targets),  # a random codebook
    'CLIPTeacher': (dict(image_size=32, patch_size=16, width=32, layers=1, heads=2, output_dim=16),
                    lambda m: m(_images(255.0))),
    'BackboneTeacher': (dict(backbone=dict(type='beit_mm.BEiT', arch=VIT, img_size=32)), lambda m: m(_images(255.0))),
}


def test_every_registered_part_has_a_row():
    assert sorted(registered('tokenizers') + registered('heads') + registered('necks')) == sorted(PARTS)


@pytest.mark.parametrize('part', sorted(PARTS))
def test_part_builds_and_runs(part):
    cfg, call = PARTS[part]
    torch.manual_seed(0)
    model = MODELS.build(dict(type=f'beit_mm.{part}', **cfg))
    if hasattr(model, 'init_weights'):
        model.init_weights()
    out = call(model)
    values = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, tuple) else [out]
    assert values and all(v.shape[:1] in ((2, ), ()) and v.float().isfinite().all() for v in values)
    losses = [v for k, v in out.items() if k.startswith('loss')] if isinstance(out, dict) else []
    if losses:  # a part with a loss trains: every trainable parameter gets a gradient
        sum(losses).backward()
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


# ------------------------------------------------------------------------------------------------------- converters
def _beit(**kw) -> torch.nn.Module:
    return randomize_(MODELS.build(dict(type='beit_mm.BEiT', arch=VIT, img_size=32, drop_path_rate=0.0, **kw)))


def _cvt(**kw) -> torch.nn.Module:
    return randomize_(MODELS.build(dict(type='beit_mm.CvT', **BACKBONES['CvT'][0], **kw)))


def _dinov2_style(**kw) -> torch.nn.Module:
    return _beit(use_rel_pos_bias=False, use_abs_pos_emb=True, no_embed_class=True, num_register_tokens=4,
                 final_norm=True, **kw)


def _upernet() -> torch.nn.Module:
    init_default_scope('mmseg')
    cfg = Config.fromfile(osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py'))
    cfg.model.neck.norm_cfg = cfg.model.decode_head.norm_cfg = dict(type='BN', requires_grad=True)
    cfg.model.pop('data_preprocessor')
    return randomize_(MODELS.build(cfg.model))


def _eomt() -> torch.nn.Module:
    return randomize_(MODELS.build(dict(
        type='beit_mm.EoMT', num_classes=5, num_queries=6, num_blocks=1,
        backbone=dict(type='beit_mm.BEiT', arch=VIT, img_size=32, use_rel_pos_bias=False, use_abs_pos_emb=True,
                      no_embed_class=True, num_register_tokens=4, final_norm=True, drop_path_rate=0.0),
        loss=dict(type='beit_mm.MaskClassificationLoss', num_classes=5, num_points=16))))


def _pmt() -> torch.nn.Module:
    return randomize_(MODELS.build(dict(
        type='beit_mm.PMT', num_classes=5, num_queries=6, num_blocks=2, feature_indices=(0, 1),
        norm_cfg=dict(type='BN1d'), backbone=dict(type='beit_mm.DINOv3', arch=VIT, img_size=32),
        loss=dict(type='beit_mm.MaskClassificationLoss', num_classes=5, num_points=16))))


def _official_pmt(sd: dict) -> dict:
    """tue-mps/pmt's Lightning names of a tiny PMT's decoder (its HF-style decoder blocks) and its encoder as is."""
    out = {k: v for k, v in sd.items() if k.startswith('backbone.')}
    for k, v in sd.items():
        if k.startswith('neck.bn.'):
            out['network.' + k[len('neck.'):]] = v
        elif k.startswith('neck.'):
            out['network.decoder.' + k[len('neck.'):]] = v
        elif k.startswith('decoder_blocks.'):
            i, rest = k.split('.', 2)[1:]
            p = f'network.decoder.blocks.{i}.'
            if rest == 'attn.qkv.weight':
                for name, part in zip('qkv', v.chunk(3)):
                    out[f'{p}attention.{name}_proj.weight'] = part
            else:
                out[p + _rename({rest: v}, ('attn.q_bias', 'attention.q_proj.bias'),
                                ('attn.v_bias', 'attention.v_proj.bias'), ('attn.proj.', 'attention.o_proj.'),
                                ('gamma_1', 'layer_scale1.lambda1'), ('gamma_2', 'layer_scale2.lambda1'),
                                ('mlp.fc1.', 'mlp.up_proj.'), ('mlp.fc2.', 'mlp.down_proj.')).popitem()[0]] = v
        elif not k.startswith('backbone.'):
            out['network.decoder.' + k] = v
    return out


def _dalle() -> torch.nn.Module:
    return randomize_(MODELS.build(dict(type='beit_mm.DALLEEncoder', **TINY_DALLE)))


def _vqkd() -> torch.nn.Module:
    return randomize_(MODELS.build(dict(type='beit_mm.VQKD', arch=VQKD_ARCH)))


def _adapter() -> torch.nn.Module:
    return randomize_(MODELS.build(dict(type='beit_mm.BEiTAdapter', **BACKBONES['BEiTAdapter'][0])))


def _rename(sd: dict, *rules: tuple[str, str]) -> dict:
    out = {}
    for k, v in sd.items():
        for a, b in rules:
            k = k.replace(a, b)
        out[k] = v
    return out


def _with_qkv_bias(sd: dict, key_bias: float = 0.0, mask: bool = False) -> dict:
    """q_bias / v_bias -> one qkv.bias (3C,) with the key third ``key_bias`` (and the official ``bias_mask``)."""
    out = {k: v for k, v in sd.items() if not k.endswith(('.q_bias', '.v_bias'))}
    for k in [k for k in sd if k.endswith('.q_bias')]:
        base = k[:-len('q_bias')]
        q, v = sd[k], sd[base + 'v_bias']
        out[base + 'qkv.bias'] = torch.cat([q, torch.full_like(q, key_bias), v])
        if mask:
            out[base + 'qkv.bias_mask'] = torch.cat([torch.ones_like(q), torch.zeros_like(q), torch.ones_like(v)])
    return out


def _official_dinov3(sd: dict) -> dict:
    from beit_mm.models.layers.rope import rope_periods
    out = _rename(_with_qkv_bias(sd, key_bias=0.5, mask=True), ('.gamma_1', '.ls1.gamma'), ('.gamma_2', '.ls2.gamma'),
                  ('reg_token', 'storage_tokens'))
    out['rope_embed.periods'] = rope_periods(VIT['embed_dims'] // VIT['num_heads'], 100.0)
    return out


def _timm_dinov2(sd: dict) -> dict:
    """timm's DINOv2 layout of ``model`` (patch 16, grid 2x2): the weights convert_dinov2 resamples back unchanged."""
    sd = _with_qkv_bias(sd, key_bias=0.3)
    return _rename(sd, ('.gamma_1', '.ls1.gamma'), ('.gamma_2', '.ls2.gamma'))


# (converter module, case) -> (tiny model, model state dict -> foreign state dict, foreign -> beit_mm state dict)
CONVERTERS = {
    ('beit', 'hf'): (_beit, beit_to_hf, lambda sd: convert_beit(sd, 'hf', expand_shared_bias=False)),
    ('beit', 'hf shared bias, mask token'): (
        lambda: _beit(use_rel_pos_bias=False, use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True),
        beit_to_hf, lambda sd: convert_beit(sd, 'hf', expand_shared_bias=False, keep_mim_head=True)),
    ('beit', 'timm'): (_beit, beit_to_timm, lambda sd: convert_beit(sd, 'timm')),
    ('cvt', 'hf'): (lambda: _cvt(final_norm=False), lambda sd: cvt_to_hf(sd, with_classifier=False),
                    lambda sd: convert_cvt(sd, 'hf')),
    ('cvt', 'official'): (_cvt, dict, lambda sd: convert_cvt(sd, 'official')),
    ('upernet', 'hf'): (_upernet, segmentor_to_hf, segmentor_from_hf),
    ('eomt', 'hf'): (_eomt, beit_mm_to_hf_eomt, hf_eomt_to_beit_mm),
    ('pmt', 'official onto its encoder'): (
        _pmt, _official_pmt,
        lambda sd: pmt_to_beit_mm(sd, backbone={k[9:]: v for k, v in sd.items() if k.startswith('backbone.')})),
    ('dalle', 'openai'): (_dalle,
                          lambda sd: _rename(sd, ('.weight', '.w'), ('.bias', '.b')),
                          lambda sd: convert_dalle(sd, 'openai')),
    ('dvae', 'encoder of a DVAE'): (_dalle, lambda sd: {**{f'module.encoder.{k}': v for k, v in sd.items()},
                                                        'module.decoder.blocks.input.weight': torch.zeros(1)},
                                    extract_dvae_encoder),
    ('vqkd', 'unilm'): (_vqkd, lambda sd: _rename(sd, ('coder.norm.', 'coder.fc_norm.')),
                        lambda sd: convert_vqkd(sd, 'unilm')),
    ('vqkd', 'dino teacher'): (lambda: _beit(use_abs_pos_emb=True, use_rel_pos_bias=False, layer_scale_init_value=0,
                                             final_norm=True), _with_qkv_bias, convert_dino_vit),
    ('vit_adapter', 'official'): (_adapter, lambda sd: {**{f'backbone.{k}': v for k, v in sd.items()},  # + buffers
                                                        **{f'backbone.blocks.{i}.attn.relative_position_index':
                                                           torch.zeros(17, 17, dtype=torch.long) for i in range(4)}},
                                  convert_vit_adapter),
    ('dinov2', 'timm'): (_dinov2_style, _timm_dinov2, lambda sd: convert_dinov2(sd, img_size=32, patch_size=16)),
    ('dinov3', 'official'): (
        lambda: randomize_(MODELS.build(dict(type='beit_mm.DINOv3', arch=VIT, img_size=32, num_register_tokens=2))),
        _official_dinov3, official_dinov3_to_beit_mm),
}
# Converter modules whose outputs are no model's weights, or are checked against a reference elsewhere.
NOT_WEIGHT_CONVERTERS = {'hf_config', 'layouts'}  # HF configs from a built model; the table of layouts


def test_every_converter_module_has_a_case():
    modules = {m.name for m in pkgutil.iter_modules(beit_mm.converters.__path__)} - NOT_WEIGHT_CONVERTERS
    assert modules == {module for module, _ in CONVERTERS}


@pytest.mark.parametrize('case', sorted(CONVERTERS), ids=lambda c: f'{c[0]}-{c[1]}')
def test_converter_output_loads_strictly_and_round_trips(case):
    """The foreign layout of a tiny model's weights converts back to them, and loads with ``strict=True``."""
    make, to_foreign, convert = CONVERTERS[case]
    torch.manual_seed(0)
    model = make()
    ours = {k: v.clone() for k, v in model.state_dict().items()}
    back = convert(to_foreign(dict(ours)))
    model.load_state_dict(back, strict=True)
    for key, value in ours.items():
        assert_close_to_scale(back[key].float(), value.float(), what=key)
