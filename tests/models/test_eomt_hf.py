"""beit_mm's EoMT on a DINOv2-style BEiT against HF transformers' ``EomtForUniversalSegmentation`` with the same
weights, both ways.

Reference: transformers 4.57.6 ``models/eomt/modeling_eomt.py``, run by ``tests/support/eomt_hf_reference.py`` in a
subprocess with the reference transformers on its path. A random tiny HF EoMT is converted (``--source hf``) and
loaded strictly into the ADE20K DINOv2-L config's model with only its sizes changed; class and mask logits within fp32
1e-4 (eval with masked-block probabilities 1 and 0, train with 1); ``--to hf`` loads back with no missing or
unexpected key and the same logits. Instance: the COCO instance config's model, logits within 1e-4 and ``predict``'s
instances equal to the official rule (tue-mps/eomt @ 7bd19dd ``training/mask_classification_instance.py:103-130``)."""
import os
import subprocess
import sys

import pytest
import torch
from mmdet.structures import DetDataSample
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.convert import ConversionError, convert_checkpoint
from beit_mm.apis.hub import load_hf_state_dict

from ..conftest import ROOT, load_tool

REFERENCE = os.path.join(sys.prefix, 'reference', 'transformers-4.57.6')
SCRIPT = os.path.join(ROOT, 'tests', 'support', 'eomt_hf_reference.py')
INSTANCE_SCRIPT = os.path.join(ROOT, 'tests', 'support', 'eomt_hf_instance_reference.py')
CONFIG = os.path.join(ROOT, 'configs', 'eomt', 'eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py')
INSTANCE_CONFIG = os.path.join(ROOT, 'configs', 'eomt',
                               'eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py')
TOL = 1e-4


def reference(*args: str, script: str = SCRIPT) -> None:
    if not os.path.isdir(REFERENCE):
        pytest.fail(f'{REFERENCE} is missing: the HF EoMT reference is installed there by tools/setup_env.sh (run it, '
                    'or point BEIT_MM_VENV at a venv it built)')
    env = dict(os.environ, PYTHONPATH=REFERENCE)
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def tiny_config(config: str = CONFIG) -> Config:
    """The DINOv2-L config with the reference model's sizes (eomt_hf_reference.CONFIG); nothing else changed."""
    cfg = Config.fromfile(config)
    cfg.model.backbone.update(arch=dict(embed_dims=64, num_layers=4, num_heads=4, mlp_ratio=4.0), img_size=64)
    cfg.model.update(num_classes=7, num_queries=10, num_blocks=2, mask_annealing=None)
    cfg.model.pop('data_preprocessor')
    return cfg


def our_logits(model, x: torch.Tensor) -> dict:
    out = {}
    for mode, prob in (('eval', 1.0), ('eval', 0.0), ('train', 1.0)):
        model.train(mode == 'train')
        model.attn_mask_probs.fill_(prob)
        with torch.no_grad():
            masks, classes = model.forward_predictions(x)
        out[f'{mode}_p{prob:g}'] = (classes[-1], masks[-1])
    return out


def assert_logits_close(ours: dict, ref: dict, keys: list | None = None) -> None:
    assert sorted(ours) == sorted(ref) == (keys or ['eval_p0', 'eval_p1', 'train_p1'])
    for key in ref:
        for what, a, b in zip(('class', 'mask'), ours[key], ref[key]):
            assert a.shape == b.shape, (key, what, a.shape, b.shape)
            diff = (a - b).abs().max().item()
            assert diff <= TOL, f'{key} {what} logits: max |diff| {diff:.3g} > {TOL} (max |ref| {b.abs().max():.3g})'


@pytest.fixture(scope='module')
def hf_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp('eomt_hf')
    reference('make', str(out))
    return out


def test_hf_weights_give_hf_logits(hf_reference, tmp_path):
    ref = torch.load(hf_reference / 'ref.pt')
    assert ref['version'] == '4.57.6'
    dst = tmp_path / 'eomt.pth'
    convert_checkpoint(str(hf_reference / 'hf' / 'model.safetensors'), str(dst), model='eomt', source='hf')
    model = build_from_config(tiny_config())
    model.load_state_dict(torch.load(dst)['state_dict'], strict=True)
    assert_logits_close(our_logits(model, ref['x']), ref['logits'])


def test_to_hf_loads_strictly_in_hf_with_the_same_logits(hf_reference, tmp_path):
    """beit_mm (random weights, gammas and q/v biases randomized) -> ``--to hf`` -> HF ``from_pretrained`` (strict)
    -> the same logits; and the folder read back by ``load_hf_state_dict`` is bit-identical to the model's weights."""
    cfg = tiny_config()
    cfg_path = tmp_path / 'tiny.py'
    cfg.dump(str(cfg_path))
    model = build_from_config(cfg)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'gamma' in name or name.endswith('bias') or 'reg_token' in name:
                p.copy_(torch.randn_like(p) * 0.5)
    ckpt = tmp_path / 'ckpt.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, ckpt)
    hf_dir = tmp_path / 'hf'
    convert_checkpoint(str(ckpt), str(hf_dir), to='hf', config=str(cfg_path))
    reference('run', str(hf_dir), str(hf_reference / 'ours_in_hf.pt'))
    ref = torch.load(hf_reference / 'ref.pt')
    assert_logits_close(our_logits(model, ref['x']), torch.load(hf_reference / 'ours_in_hf.pt'))
    back = load_hf_state_dict(str(hf_dir))
    sd = model.state_dict()
    assert sorted(back) == sorted(sd)
    assert all(torch.equal(back[k], sd[k]) for k in sd)


def test_models_hf_cannot_hold_are_refused(tmp_path):
    """BEiT's relative position bias and a cls-row position embedding have no HF EoMT counterpart, and a DINOv2-style
    backbone alone none in HF's BEiT or timm's: the exports name the reason (and write nothing)."""
    from beit_mm.apis.hub import hf_model_and_state_dict, timm_arguments
    from beit_mm.converters.hf_config import HFIncompatible
    cfg = tiny_config()
    cfg.model.backbone.update(use_rel_pos_bias=True, no_embed_class=False, num_register_tokens=0)
    with pytest.raises(HFIncompatible, match='relative position bias.*position embedding with a cls row'):
        hf_model_and_state_dict(build_from_config(cfg))
    dinov2_style = build_from_config(tiny_config())  # its backbone alone: HF's BeitModel / timm's Beit cannot hold it
    with pytest.raises(HFIncompatible, match='register tokens or a position embedding without a cls row'):
        hf_model_and_state_dict(dinov2_style, part='backbone')
    with pytest.raises(HFIncompatible, match='timm Beit has no register tokens'):
        timm_arguments(dinov2_style, str(tmp_path / 'x.pth'))


def test_to_hf_of_a_beit_eomt_names_the_reason(tmp_path):
    """``--to hf`` of a BEiT EoMT (relative position bias, no absolute position embedding) names what HF's EoMT cannot
    hold and writes nothing."""
    cfg = tiny_config()
    cfg.model.backbone.update(use_abs_pos_emb=False, use_rel_pos_bias=True, no_embed_class=False,
                              num_register_tokens=0)
    cfg_path = tmp_path / 'beit_eomt.py'
    cfg.dump(str(cfg_path))
    ckpt = tmp_path / 'ckpt.pth'
    torch.save({'state_dict': build_from_config(cfg).state_dict(), 'meta': {}}, ckpt)
    with pytest.raises(ConversionError) as stopped:
        convert_checkpoint(str(ckpt), str(tmp_path / 'hf'), to='hf', config=str(cfg_path))
    message = str(stopped.value)
    assert 'relative position bias (HF EoMT has absolute position embeddings only)' in message, message
    assert 'None' not in message and 'pos_embed' not in message and not os.path.exists(tmp_path / 'hf')


def test_hf_instance_weights_give_the_official_instances(tmp_path):
    ref_dir = tmp_path / 'ref'
    ref_dir.mkdir()
    reference(str(ref_dir), script=INSTANCE_SCRIPT)
    ref = torch.load(ref_dir / 'ref.pt')
    assert ref['version'] == '4.57.6'
    dst = tmp_path / 'eomt.pth'
    load_tool('tools/convert_checkpoint.py').main(['--model', 'eomt', '--source', 'hf',
                                                   str(ref_dir / 'hf' / 'model.safetensors'), str(dst)])
    cfg = tiny_config(INSTANCE_CONFIG)
    cfg.model.update(num_classes=8, top_k_instances=ref['top_k'])
    assert cfg.model.task == 'instance'
    model = build_from_config(cfg).eval()
    model.load_state_dict(torch.load(dst)['state_dict'], strict=True)
    assert model.attn_mask_probs.tolist() == [0.0, 0.0]  # the checkpoint's: annealing done
    with torch.no_grad():
        masks, classes = model.forward_predictions(ref['x'])
    assert_logits_close({'eval_p0': (classes[-1], masks[-1])},
                        {'eval_p0': (ref['class_logits'], ref['mask_logits'])}, keys=['eval_p0'])
    side = tuple(ref['x'].shape[-2:])
    samples = [DetDataSample(metainfo=dict(img_shape=img, ori_shape=ori, batch_input_shape=side))
               for img, ori in zip(ref['img_shapes'], ref['ori_shapes'])]
    with torch.no_grad():
        results = model.predict(ref['x'], samples)
    for result, expected in zip(results, ref['instances']):
        ours = result.pred_instances
        assert len(ours) == len(expected['labels']) == ref['top_k']
        # the same instances (unsorted top-k on either side): ordered by score, then compared one by one
        a, b = ours.scores.argsort(descending=True), expected['scores'].argsort(descending=True)
        assert ours.labels[a].tolist() == expected['labels'][b].tolist()
        assert torch.equal(ours.masks[a], expected['masks'][b])
        diff = (ours.scores[a] - expected['scores'][b]).abs().max().item()
        assert diff <= TOL, f'instance scores: max |diff| {diff:.3g} > {TOL}'
        assert expected['masks'].flatten(1).any(1).sum() >= 5, 'the example should give several non-empty masks'
