"""DINOv3 conversions carry what the source declares, or refuse: 0 register tokens load strictly; the HF
``config.json``'s ``rope_theta``, ``layer_norm_eps``, ``num_attention_heads`` and the official file's RoPE periods
reach the converted file's ``meta['dinov3']``, and a DINOv3 (or ``--config``) built otherwise refuses the file by
name. Reference: transformers 4.57.6 ``DINOv3ViTModel`` (``$VENV/reference/transformers-4.57.6``, run in a
subprocess) with rope_theta 1000, layer_norm_eps 1e-6 and 0 / 2 registers against the converted beit_mm DINOv3,
final-normed tokens, fp32 max |diff| <= 1e-4."""
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save_file

from beit_mm.apis.convert import ConversionError, convert_checkpoint
from beit_mm.converters.dinov3 import hf_eomt_dinov3_to_beit_mm, official_dinov3_settings
from beit_mm.models.layers.rope import rope_periods
from beit_mm.registry import MODELS

from ..conftest import ROOT

REFERENCE = os.path.join(sys.prefix, 'reference', 'transformers-4.57.6')
SCRIPT = os.path.join(os.path.dirname(__file__), 'dinov3_hf_settings_reference.py')
TOL = 1e-4
C, HEADS = 64, 4
ARCH = dict(embed_dims=C, num_layers=1, num_heads=HEADS, mlp_ratio=4.0)
ADE_CONFIG = os.path.join(ROOT, 'configs', 'eomt', 'eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py')


def hf_weights(regs: int, prefix: str = 'layer.') -> dict:
    """A random one-layer HF DINOv3 state dict (``DINOv3ViTModel`` names; EoMT-DINOv3's with ``prefix='layers.'``)."""
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.1

    sd = {'embeddings.cls_token': r(1, 1, C), 'embeddings.mask_token': r(1, 1, C),
          'embeddings.register_tokens': r(1, regs, C), 'embeddings.patch_embeddings.weight': r(C, 3, 16, 16),
          'embeddings.patch_embeddings.bias': r(C)}
    p = f'{prefix}0.'
    for n in ('q', 'k', 'v', 'o'):
        sd[f'{p}attention.{n}_proj.weight'] = r(C, C)
    for n in ('q', 'v', 'o'):
        sd[f'{p}attention.{n}_proj.bias'] = r(C)
    for n in ('norm1', 'norm2'):
        sd[f'{p}{n}.weight'], sd[f'{p}{n}.bias'] = 1 + r(C), r(C)
    sd.update({f'{p}layer_scale1.lambda1': r(C), f'{p}layer_scale2.lambda1': r(C),
               f'{p}mlp.up_proj.weight': r(4 * C, C), f'{p}mlp.up_proj.bias': r(4 * C),
               f'{p}mlp.down_proj.weight': r(C, 4 * C), f'{p}mlp.down_proj.bias': r(C)})
    if prefix == 'layer.':
        sd.update({'norm.weight': 1 + r(C), 'norm.bias': r(C)})
    else:
        sd.update({'layernorm.weight': 1 + r(C), 'layernorm.bias': r(C), 'query.weight': r(5, C)})
    return sd


def write_hf(folder, regs: int = 0, **config) -> str:
    """``folder``/model.safetensors and its config.json (``DINOv3ViTConfig`` keys); returns the weights' path."""
    os.makedirs(folder, exist_ok=True)
    save_file(hf_weights(regs), os.path.join(folder, 'model.safetensors'))
    config = dict(model_type='dinov3_vit', hidden_size=C, num_attention_heads=HEADS, num_hidden_layers=1,
                  patch_size=16, num_register_tokens=regs, **config)
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(config, f)
    return os.path.join(folder, 'model.safetensors')


def dinov3(checkpoint=None, **settings):
    init_cfg = None if checkpoint is None else dict(type='Pretrained', checkpoint=str(checkpoint))
    return MODELS.build(dict(type='beit_mm.DINOv3', arch=ARCH, img_size=64, init_cfg=init_cfg, **settings))


def test_zero_register_tokens_load_strictly(tmp_path):
    dst = tmp_path / 'regs0.pth'
    convert_checkpoint(write_hf(tmp_path / 'hf'), str(dst), model='dinov3', source='hf')
    converted = torch.load(dst)
    assert 'reg_token' not in converted['state_dict']
    assert converted['meta']['dinov3']['num_register_tokens'] == 0
    dinov3(num_register_tokens=0).load_state_dict(converted['state_dict'], strict=True)
    eomt = hf_eomt_dinov3_to_beit_mm(hf_weights(0, prefix='layers.'))
    assert 'backbone.reg_token' not in eomt and 'q.weight' in eomt


def test_hf_rope_base_and_norm_eps_are_carried_or_refused(tmp_path, capsys):
    dst = tmp_path / 'dinov3.pth'
    convert_checkpoint(write_hf(tmp_path / 'hf', regs=2, rope_theta=1000.0, layer_norm_eps=1e-6), str(dst),
                       model='dinov3', source='hf')
    declared = torch.load(dst)['meta']['dinov3']
    assert declared == dict(patch_size=16, num_heads=HEADS, num_register_tokens=2, rope_base=1000.0,
                            rope_min_period=None, rope_max_period=None, rope_normalize_coords='separate',
                            norm_eps=1e-6)
    assert "rope_base=1000.0" in capsys.readouterr().out
    dinov3(dst, num_register_tokens=2, rope_base=1000.0, norm_eps=1e-6).init_weights()
    with pytest.raises(ValueError, match=r"rope_base: the checkpoint 1000\.0, the DINOv3 loading it 100\.0; norm_eps: "
                                         r"the checkpoint 1e-06, the DINOv3 loading it 1e-05\).*Fix: set "
                                         r"rope_base=1000\.0, norm_eps=1e-06 in the DINOv3's config"):
        dinov3(dst, num_register_tokens=2).init_weights()


def test_conversion_refuses_a_config_that_disagrees(tmp_path):
    src = write_hf(tmp_path / 'hf', regs=2, rope_theta=1000.0)
    config = tmp_path / 'cfg.py'
    config.write_text(f'model = dict(type="Foo", backbone=dict(type="beit_mm.DINOv3", arch={ARCH!r}, '
                      'num_register_tokens=2))\n')
    dst = tmp_path / 'dinov3.pth'
    with pytest.raises(ConversionError, match=r'rope_base: the checkpoint 1000\.0, --config .*cfg\.py 100\.0\).*'
                                              r'set rope_base=1000\.0 in model\.backbone of that config'):
        convert_checkpoint(src, str(dst), model='dinov3', source='hf', config=str(config))
    assert not dst.exists()
    os.remove(tmp_path / 'hf' / 'config.json')
    with pytest.raises(ConversionError, match='no config.json beside it'):
        convert_checkpoint(src, str(dst), model='dinov3', source='hf')


def test_official_converter_takes_the_checkpoints_rope_base(tmp_path):
    model = dinov3(rope_base=1000.0)
    sd = {k: v for k, v in model.state_dict().items()}
    official = {'rope_embed.periods': rope_periods(C // HEADS, 1000.0), 'cls_token': sd['cls_token'],
                'storage_tokens': sd['reg_token'], 'patch_embed.proj.weight': sd['patch_embed.proj.weight'],
                'patch_embed.proj.bias': sd['patch_embed.proj.bias'], 'norm.weight': sd['norm.weight'],
                'norm.bias': sd['norm.bias'],
                'blocks.0.attn.qkv.bias': torch.cat([sd['blocks.0.attn.q_bias'], torch.zeros(C),
                                                     sd['blocks.0.attn.v_bias']])}
    for key, value in sd.items():
        if key.startswith('blocks.0.') and 'q_bias' not in key and 'v_bias' not in key:
            official[key.replace('gamma_1', 'ls1.gamma').replace('gamma_2', 'ls2.gamma')] = value
    src, dst = tmp_path / 'official.pth', tmp_path / 'dinov3.pth'
    torch.save(official, src)
    convert_checkpoint(str(src), str(dst), model='dinov3', source='official')
    assert torch.load(dst)['meta']['dinov3'] == dict(patch_size=16, num_heads=HEADS, num_register_tokens=4,
                                                     rope_base=1000.0, rope_min_period=None, rope_max_period=None)
    dinov3(dst, rope_base=1000.0).init_weights()
    with pytest.raises(ValueError, match=r'rope_base: the checkpoint 1000\.0, the DINOv3 loading it 100\.0'):
        dinov3(dst).init_weights()
    log_spaced = official_dinov3_settings(dict(official, **{'rope_embed.periods': rope_periods(16, None, 2.0, 50.0)}))
    assert (log_spaced['rope_min_period'], log_spaced['rope_max_period']) == (2.0, 50.0)


@pytest.fixture(scope='module')
def hf_reference(tmp_path_factory):
    if not os.path.isdir(os.path.join(REFERENCE, 'transformers')):
        pytest.skip(f'transformers 4.57.6 is not at {REFERENCE} (tools/setup_env.sh installs it)')
    out = tmp_path_factory.mktemp('dinov3_hf')
    cases = ['regs0={"num_register_tokens": 0}',
             'base1000={"rope_theta": 1000.0, "layer_norm_eps": 1e-6, "num_register_tokens": 2}']
    proc = subprocess.run([sys.executable, SCRIPT, str(out), *cases], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=REFERENCE), cwd=str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (out / 'version.txt').read_text() == '4.57.6'
    return out


@pytest.mark.parametrize('case', ['regs0', 'base1000'])
def test_converted_settings_give_the_references_tokens(case, hf_reference, tmp_path):
    dst = tmp_path / f'{case}.pth'
    convert_checkpoint(str(hf_reference / case / 'model.safetensors'), str(dst), model='dinov3', source='hf')
    converted = torch.load(dst)
    settings = {k: v for k, v in converted['meta']['dinov3'].items() if k != 'num_heads'}
    model = MODELS.build(dict(type='beit_mm.DINOv3', arch=dict(embed_dims=64, num_layers=2, num_heads=4,
                                                               mlp_ratio=4.0), img_size=64, **settings)).eval()
    model.load_state_dict(converted['state_dict'], strict=True)
    ref = torch.load(hf_reference / case / 'ref.pt')
    with torch.no_grad():
        (ours, ), _ = model.forward_tokens(ref['x'], out_indices=(1, ))
    diff = (ours - ref['final']).abs().max().item()
    print(f'{case}: max |diff| {diff:.3g} against transformers 4.57.6 DINOv3ViTModel')
    assert diff <= TOL, f'{case}: max |diff| {diff:.3g} > {TOL}'


def test_hf_eomt_dinov3_settings_against_a_shipped_config(tmp_path):
    """``layer_norm_eps`` left out of an EoMT-DINOv3 config.json is transformers' 1e-6 (EomtDinov3Config), which the
    shipped ADE20K config (1e-5) refuses by name before anything is written."""
    (tmp_path / 'hf').mkdir()
    src = str(tmp_path / 'hf' / 'model.safetensors')
    save_file(hf_weights(4, prefix='layers.'), src)
    (tmp_path / 'hf' / 'config.json').write_text(json.dumps(dict(model_type='eomt_dinov3', num_attention_heads=16)))
    dst = tmp_path / 'eomt.pth'
    with pytest.raises(ConversionError, match=r'norm_eps: the checkpoint 1e-06, --config .*ade20k-512x512\.py 1e-05\)'
                                              r'.*set norm_eps=1e-06 in model\.backbone of that config'):
        convert_checkpoint(src, str(dst), model='eomt', source='hf', config=ADE_CONFIG)
    assert not dst.exists()
    convert_checkpoint(src, str(dst), model='eomt', source='hf')
    assert torch.load(dst)['meta']['dinov3']['norm_eps'] == 1e-6


def test_hf_config_of_another_model_is_refused(tmp_path):
    src = write_hf(tmp_path / 'hf', regs=0)
    (tmp_path / 'hf' / 'config.json').write_text(json.dumps(dict(model_type='dinov3_vit', num_attention_heads=5,
                                                                 num_register_tokens=4, patch_size=14)))
    with pytest.raises(ConversionError, match=r'declares num_register_tokens 4 \(the weights: 0\), patch_size 14 '
                                              r'\(the weights: 16\), num_heads 5 .*the config of another model'):
        convert_checkpoint(src, str(tmp_path / 'x.pth'), model='dinov3', source='hf')
