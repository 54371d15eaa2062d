"""PMT (``beit_mm.PMT``): its trainable size, the frozen encoder through MMEngine's training loop, and checkpoints of
the decoder only. Numbers against the parity test's reference are in test_pmt_reference.py."""
import contextlib
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.data.demo.coco import make_demo_coco
from beit_mm.registry import MODELS

from ..conftest import ROOT
from ..support.demo_configs import short_demo

PMT_CONFIGS = osp.join(ROOT, 'configs', 'pmt')
DEMO = osp.join(ROOT, 'configs', 'demo', 'pmt_dinov3-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')
ITERS = 2
# Trainable parameters, counted from tue-mps/pmt@54d73c9 image/models/pmt.py:43-47 (a BN per level), pmd.py:57-98
# (lateral MLPs, scalers, queries, six blocks, norm, two ScaleBlocks, mask and class heads) and layers.py:225-248
# (the block: no key bias, a layer scale of C per branch, MLP hidden = hidden_dim = C, pmt_l_640.yaml:24): the issue's
# 53,935,238 for PMT-L COCO panoptic (133 classes + no object); S and B as model_zoo/image/dinov3.md rounds them
# (the README's 7.7M / 30.4M).
TRAINABLE = {
    'pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py': 53_935_238,
    'pmt_dinov3-base-p16_1xb16-amp-12e_coco-panoptic-640x640.py': 30.4e6,
    'pmt_dinov3-small-p16_1xb16-amp-12e_coco-panoptic-640x640.py': 7.7e6,
}


@contextlib.contextmanager
def _weights_on_meta():
    """Every parameter registered while inside moves to the meta device at once (each ``torch.empty`` is freed
    before the next: the model's weights are never held, and their init runs on meta tensors, doing nothing)."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, None if param is None else torch.nn.Parameter(param.to('meta'), param.requires_grad))

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def _meta_model(config: str) -> torch.nn.Module:
    """The config's model with its weights on the meta device, no file read."""
    cfg = Config.fromfile(osp.join(PMT_CONFIGS, config))
    cfg.model.backbone.init_cfg = None
    with _weights_on_meta():
        model = MODELS.build(cfg.model)
    assert all(p.is_meta for p in model.parameters())
    return model


@pytest.mark.parametrize('config', sorted(TRAINABLE))
def test_trainable_parameters_are_the_decoder(config):
    model = _meta_model(config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    want = TRAINABLE[config]
    if isinstance(want, int):
        assert trainable == want, f'{config}: {trainable:,} trainable parameters, tue-mps/pmt\'s count {want:,}'
    else:
        assert round(trainable / 1e5) / 10 == want / 1e6, f'{config}: {trainable:,} ~ {want / 1e6}M'
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert all(p.requires_grad for name, p in model.named_parameters() if not name.startswith('backbone.'))


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 4, 2, 64, seed=0)


def _demo(coco_root: str, work_dir) -> Config:
    cfg = short_demo(DEMO, coco_root, work_dir, ITERS)
    cfg.model.mask_annealing.update(start_steps=[0, 1, 1, 1, 1, 1], end_steps=[1, 2, 2, 2, 2, 3])
    cfg.model.loss.num_points = 64
    return cfg


def test_runner_trains_the_decoder_and_leaves_the_encoder_frozen(coco_root, tmp_path):
    """MMEngine's loop calls ``model.train()``: the encoder stays in eval mode (RoPE unaugmented), gets no gradient and
    keeps its weights; the decoder learns; the test after it scores PQ."""
    runner = Runner.from_cfg(_demo(coco_root, tmp_path / 'work'))
    seen = []
    for part in (runner.model.backbone.rope, runner.model.backbone.blocks[0]):  # the encoder's modules that run
        part.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    runner.model.neck.register_forward_pre_hook(lambda module, args: seen.append(('neck', module.training)))
    runner.train()
    model = runner.model
    assert ('neck', True) in seen, 'the decoder never trained'
    assert False in seen and True not in seen, 'the frozen encoder ran in training mode'
    assert all(p.grad is None and not p.requires_grad for p in model.backbone.parameters())
    ckpt = torch.load(tmp_path / 'work' / f'iter_{ITERS}.pth', map_location='cpu', weights_only=False)['state_dict']
    for key, value in model.backbone.state_dict().items():  # a random encoder is saved, and never changed
        assert torch.equal(ckpt[f'backbone.{key}'], value), key
    fresh = MODELS.build(Config.fromfile(DEMO).model)
    fresh.init_weights()
    changed = [k for k, v in fresh.state_dict().items() if not k.startswith('backbone.') and v.is_floating_point()
               and not torch.equal(v, ckpt[k])]
    assert any(k.startswith('decoder_blocks.') for k in changed), 'the decoder did not learn'
    metrics = runner.test()
    assert 0.0 <= metrics['coco_panoptic/PQ'] <= 100.0


def test_an_encoder_read_from_a_file_is_not_saved_and_is_read_again(tmp_path):
    """``backbone.init_cfg`` Pretrained: the checkpoint holds the decoder alone; a model loading it reads the encoder
    from its file, so a fresh model gives the trained model's logits."""
    cfg = Config.fromfile(DEMO).model
    encoder = MODELS.build(cfg.backbone)
    encoder.init_weights()
    torch.save({'state_dict': encoder.state_dict()}, tmp_path / 'encoder.pth')
    cfg.backbone.init_cfg = dict(type='Pretrained', checkpoint=str(tmp_path / 'encoder.pth'))
    torch.manual_seed(0)
    trained = MODELS.build(cfg)
    trained.init_weights()
    state_dict = trained.state_dict()
    assert state_dict and not [k for k in state_dict if k.startswith('backbone.')]
    torch.manual_seed(1)
    fresh = MODELS.build(cfg)  # its encoder random until the load reads the file
    assert not torch.equal(fresh.backbone.blocks[0].attn.qkv.weight, encoder.blocks[0].attn.qkv.weight)
    fresh.load_state_dict(state_dict, strict=True)
    assert torch.equal(fresh.backbone.blocks[0].attn.qkv.weight, encoder.blocks[0].attn.qkv.weight)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(trained.eval().forward_predictions(x)[1][-1], fresh.eval().forward_predictions(x)[1][-1])
    del state_dict['q.weight']
    with pytest.raises(RuntimeError, match=re.escape('q.weight')):
        fresh.load_state_dict(state_dict, strict=True)


def test_feature_indices_outside_the_encoder_are_refused():
    cfg = Config.fromfile(DEMO).model
    cfg.feature_indices = (1, 4)
    with pytest.raises(ValueError, match=r'feature_indices=\(1, 4\) must name blocks of the 4-block encoder'):
        MODELS.build(cfg)


def test_an_encoder_other_than_dinov3_is_refused():
    cfg = Config.fromfile(DEMO).model
    cfg.backbone = dict(type='beit_mm.BEiT', arch=dict(embed_dims=96, num_layers=4, num_heads=3, mlp_ratio=4.0),
                        img_size=64, patch_size=8, final_norm=True, drop_path_rate=0.0)
    with pytest.raises(ValueError, match='PMT reads a beit_mm.DINOv3 encoder .* got BEiT'):
        MODELS.build(cfg)
