"""beit_mm's PMT against tue-mps/pmt@54d73c9 with the same random weights.

Reference: tue-mps/pmt@54d73c9 ``image/models/pmt.py``, ``pmd.py``, ``layers.py`` and ``vit.py`` on a random
transformers 4.57.6 ``DINOv3ViTModel``, run by ``tests/support/pmt_reference.py`` in a subprocess whose path holds the
reference transformers and the extracted repository (``$BEIT_MM_PMT_SRC``, a folder holding its ``image/``; default
``$VENV/reference/pmt``). The encoder converts with ``--model dinov3 --source hf``, the Lightning-style decoder file
with ``--model pmt --source official``; both load strictly into the COCO panoptic PMT-L config's model with only its
sizes changed. Every one of the seven predictions' class and mask logits within fp32 1e-4: training mode (batch
statistics, the encoder kept in eval mode: RoPE unaugmented) with masked attention kept (p = 1), annealed (p = 0.5,
the same draws) and dropped (p = 0), and eval mode (running statistics) at p = 1 and p = 0."""
import os
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.convert import convert_checkpoint

from ..conftest import ROOT

SCRIPT = os.path.join(ROOT, 'tests', 'support', 'pmt_reference.py')
CONFIG = os.path.join(ROOT, 'configs', 'pmt', 'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py')
TRANSFORMERS = os.path.join(sys.prefix, 'reference', 'transformers-4.57.6')
PMT_SRC = os.environ.get('BEIT_MM_PMT_SRC', os.path.join(sys.prefix, 'reference', 'pmt'))
TOL = 1e-4
MEAN = torch.tensor([0.485, 0.456, 0.406]).reshape(1, -1, 1, 1)  # tue-mps/pmt image/models/vit.py:44-45
STD = torch.tensor([0.229, 0.224, 0.225]).reshape(1, -1, 1, 1)


def run_reference(out) -> dict:
    if not os.path.isdir(os.path.join(PMT_SRC, 'image', 'models')):
        pytest.skip(f'tue-mps/pmt@54d73c9 is not at {PMT_SRC}: extract it there (git archive 54d73c9 image | tar x) '
                    'or set BEIT_MM_PMT_SRC to a folder holding its image/')
    if not os.path.isdir(TRANSFORMERS):
        pytest.fail(f'{TRANSFORMERS} is missing: tools/setup_env.sh installs the reference transformers there')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TRANSFORMERS, os.path.join(PMT_SRC, 'image')]))
    proc = subprocess.run([sys.executable, SCRIPT, str(out)], capture_output=True, text=True, env=env, cwd=str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return torch.load(out / 'ref.pt')


def tiny_model(tmp_path):
    """The PMT-L COCO panoptic config's model at the reference script's sizes, its weights converted from the
    reference's files."""
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.update(arch=dict(embed_dims=64, num_layers=4, num_heads=4, mlp_ratio=4.0), img_size=64,
                              init_cfg=None)
    cfg.model.update(num_classes=7, num_things_classes=4, num_queries=10, feature_indices=(0, 1, 3), mask_annealing=None)
    cfg.model.pop('data_preprocessor')
    model = build_from_config(cfg)
    encoder = convert_checkpoint(str(tmp_path / 'encoder.pt'), str(tmp_path / 'dinov3.pth'), model='dinov3',
                                 source='hf')
    decoder = convert_checkpoint(str(tmp_path / 'decoder.pt'), str(tmp_path / 'pmt.pth'), model='pmt',
                                 source='official')
    state_dict = {f'backbone.{k}': v for k, v in torch.load(encoder)['state_dict'].items()}
    model.load_state_dict({**state_dict, **torch.load(decoder)['state_dict']}, strict=True)
    return model


def test_every_prediction_matches_the_reference(tmp_path):
    ref = run_reference(tmp_path)
    model = tiny_model(tmp_path)
    x = (ref['x'] - MEAN) / STD  # the reference normalizes inside its forward, beit_mm in its data preprocessor
    start = {k: v.clone() for k, v in model.state_dict().items()}
    for key, (class_ref, mask_ref) in ref['logits'].items():
        mode, prob = key.split('_p')
        model.load_state_dict(start)  # each run from the files' BatchNorm statistics, as the reference's
        model.train(mode == 'train')
        assert not model.backbone.training
        model.attn_mask_probs.fill_(float(prob))
        phases = ('keep' if float(prob) == 1 else 'draw', ) * model.num_blocks
        torch.manual_seed(5)
        with torch.no_grad():
            masks, classes = model.predictions(x, phases)
        assert len(masks) == len(classes) == len(mask_ref) == len(class_ref) == 7
        for i in range(7):
            for what, ours, theirs in (('class', classes[i], class_ref[i]), ('mask', masks[i], mask_ref[i])):
                assert ours.shape == theirs.shape, (key, i, what)
                diff = (ours - theirs).abs().max().item()
                assert diff <= TOL, f'PMT {key} prediction {i} {what} logits: max |diff| {diff:.3g} > {TOL}'
        print(f'PMT {key}: 7 predictions, max |diff| '
              f'{max((a - b).abs().max().item() for a, b in zip(classes + masks, class_ref + mask_ref)):.3g}')
    model.load_state_dict(start)
    model.eval()
    model.attn_mask_probs.zero_()  # after annealing, inference predicts once, at the end
    with torch.no_grad():
        masks, classes = model.forward_predictions(x)
    class_ref, mask_ref = ref['logits']['eval_p0']
    assert len(masks) == 1
    assert (classes[0] - class_ref[-1]).abs().max() <= TOL and (masks[0] - mask_ref[-1]).abs().max() <= TOL
