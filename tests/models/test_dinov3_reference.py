"""beit_mm's DINOv3 (and EoMT on it) against the reference implementations with the same random weights.

Each reference runs ``tests/support/dinov3_reference.py`` in a subprocess led by the reference alone; its state dict
is converted (``--model dinov3 --source official|hf``, ``--model eomt --source hf``), loaded strictly, and the outputs
compared in fp32, max |diff| <= 1e-4. References (a missing one skips its tests, naming it):

- facebookresearch/dinov3 @ 6876159 ``DinoVisionTransformer`` (``$BEIT_MM_DINOV3_SRC`` or ``$VENV/reference/dinov3``);
- transformers 4.57.6 ``DINOv3ViTModel`` (``$VENV/reference/transformers-4.57.6``);
- transformers >= 5.2 ``EomtDinov3ForUniversalSegmentation`` (``$BEIT_MM_TRANSFORMERS5`` or
  ``$VENV/reference/transformers-5.2.0``)."""
import os
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.convert import convert_checkpoint
from beit_mm.registry import MODELS

from ..conftest import ROOT

SCRIPT = os.path.join(ROOT, 'tests', 'support', 'dinov3_reference.py')
TOL = 1e-4
DINOV3_COMMIT = '6876159a11b4df116f30f667f8c9888617df0751'
REFERENCES = {
    'official': os.environ.get('BEIT_MM_DINOV3_SRC', os.path.join(sys.prefix, 'reference', 'dinov3')),
    'hf': os.path.join(sys.prefix, 'reference', 'transformers-4.57.6'),
    'hf-eomt': os.environ.get('BEIT_MM_TRANSFORMERS5', os.path.join(sys.prefix, 'reference', 'transformers-5.2.0')),
}
MISSING = {
    'official': 'the facebookresearch/dinov3 checkout (a folder holding the dinov3 package, commit '
                f'{DINOV3_COMMIT[:7]}) is not at {REFERENCES["official"]}: set BEIT_MM_DINOV3_SRC',
    'hf': f'transformers 4.57.6 is not at {REFERENCES["hf"]} (tools/setup_env.sh installs it)',
    'hf-eomt': f'transformers >= 5.2 (EomtDinov3ForUniversalSegmentation) is not at {REFERENCES["hf-eomt"]}: '
               'pip install --no-deps --target DIR transformers==5.2.0 "huggingface-hub==1.3.0" and its pure-Python '
               'dependencies, then set BEIT_MM_TRANSFORMERS5=DIR',
}
ADE_CONFIG = os.path.join(ROOT, 'configs', 'eomt', 'eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py')


def run_reference(kind: str, out, ffn: str = 'mlp') -> dict:
    folder = REFERENCES[kind]
    present = os.path.isdir(os.path.join(folder, 'dinov3' if kind == 'official' else 'transformers'))
    if not present:
        pytest.skip(MISSING[kind])
    env = dict(os.environ, PYTHONPATH=folder)
    proc = subprocess.run([sys.executable, SCRIPT, kind, str(out), ffn], capture_output=True, text=True, env=env,
                          cwd=str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return torch.load(out / 'ref.pt')


def tiny_backbone(ffn: str) -> torch.nn.Module:
    """The reference script's model (64 wide, 3 blocks, 4 heads, 4 registers, patch 16) as a beit_mm DINOv3."""
    arch = dict(embed_dims=64, num_layers=3, num_heads=4, mlp_ratio=4.0, ffn=ffn)
    return MODELS.build(dict(type='beit_mm.DINOv3', arch=arch, img_size=64, out_indices=(0, 1, 2))).eval()


@pytest.mark.parametrize('kind', ['official', 'hf'])
@pytest.mark.parametrize('ffn', ['mlp', 'swiglu'])
def test_features_of_every_block_match_the_reference(kind, ffn, tmp_path):
    ref = run_reference(kind, tmp_path, ffn)
    if kind == 'hf':
        assert ref['version'] == '4.57.6'
    dst = tmp_path / 'dinov3.pth'
    convert_checkpoint(str(tmp_path / 'weights.pt'), str(dst), model='dinov3', source=kind)
    model = tiny_backbone(ffn)
    model.load_state_dict(torch.load(dst)['state_dict'], strict=True)
    for result in ref['results']:
        x = result['x']
        with torch.no_grad():  # every returned layer: blocks 0 and 1, the last block through the final norm
            blocks, _ = model.forward_tokens(x, out_indices=(0, 1, 2))
        pairs = [('block 0', blocks[0], result['blocks'][0]), ('block 1', blocks[1], result['blocks'][1]),
                 ('block 2 + final norm', blocks[2], result['final'])]
        for what, ours, theirs in pairs:
            assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
            diff = (ours - theirs).abs().max().item()
            assert diff <= TOL, f'{kind} {ffn} {tuple(x.shape[-2:])} {what}: max |diff| {diff:.3g} > {TOL}'
            print(f'{kind} {ffn} {tuple(x.shape[-2:])} {what}: max |diff| {diff:.3g}')
        maps = model(x)  # and the NCHW maps the segmentors read: the patch tokens on the grid
        h, w = x.shape[-2] // 16, x.shape[-1] // 16
        want = result['final'][:, 5:].transpose(1, 2).reshape(x.shape[0], -1, h, w)
        assert (maps[-1] - want).abs().max().item() <= TOL


def test_hf_eomt_dinov3_weights_give_its_logits(tmp_path):
    ref = run_reference('hf-eomt', tmp_path)
    dst = tmp_path / 'eomt.pth'
    convert_checkpoint(str(tmp_path / 'weights.pt'), str(dst), model='eomt', source='hf')
    cfg = Config.fromfile(ADE_CONFIG)
    cfg.model.backbone.update(arch=dict(embed_dims=64, num_layers=3, num_heads=4, mlp_ratio=4.0), img_size=64,
                              rope_rescale_coords=None, init_cfg=None)
    cfg.model.update(num_classes=7, num_queries=10, num_blocks=2, mask_annealing=None)
    cfg.model.pop('data_preprocessor')
    model = build_from_config(cfg)
    model.load_state_dict(torch.load(dst)['state_dict'], strict=True)
    (result, ) = ref['results']
    for key, (class_ref, mask_ref) in result['logits'].items():
        mode, prob = key.split('_p')
        model.train(mode == 'train')
        model.attn_mask_probs.fill_(float(prob))
        with torch.no_grad():
            masks, classes = model.forward_predictions(result['x'])
        for what, ours, theirs in (('class', classes[-1], class_ref), ('mask', masks[-1], mask_ref)):
            assert ours.shape == theirs.shape, (key, what)
            diff = (ours - theirs).abs().max().item()
            assert diff <= TOL, f'EoMT-DINOv3 {key} {what} logits: max |diff| {diff:.3g} > {TOL} ({ref["version"]})'
            print(f'EoMT-DINOv3 {key} {what} logits: max |diff| {diff:.3g} ({ref["version"]})')
