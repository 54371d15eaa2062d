"""CvT backbone, conv-projection attention and checkpoint converters against HF transformers 4.46.3 ``CvtModel`` /
``CvtForImageClassification`` with random weights, converted and loaded strictly (eval, fp32, max |diff| <= 1e-4)."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import CvtConfig, CvtForImageClassification, CvtModel
from transformers.activations import QuickGELUActivation
from transformers.modeling_utils import no_init_weights

from beit_mm.converters.cvt import convert_cvt
from beit_mm.models.backbones.cvt import CvT, QuickGELU

TOL = 1e-4
PRESETS = {
    'cvt-13': dict(embed_dims=[64, 192, 384], depths=[1, 2, 10], num_heads=[1, 3, 6]),
    'cvt-21': dict(embed_dims=[64, 192, 384], depths=[1, 4, 16], num_heads=[1, 3, 6]),
    'cvt-w24': dict(embed_dims=[192, 768, 1024], depths=[2, 2, 20], num_heads=[3, 12, 16]),
}
SMALL_13 = dict(embed_dims=[16, 32, 48], depths=[1, 2, 3], num_heads=[1, 2, 3])  # CvT-13 shape, shrunk
SMALL_21 = dict(embed_dims=[16, 32, 48], depths=[1, 4, 4], num_heads=[1, 2, 4])  # CvT-21 shape, shrunk


def hf_config(arch: dict) -> CvtConfig:
    return CvtConfig(
        embed_dim=arch['embed_dims'],
        depth=arch['depths'],
        num_heads=arch['num_heads'],
        drop_path_rate=[0.0, 0.0, 0.0],
        num_labels=1000)


def randomize(model: nn.Module, seed: int = 0) -> None:
    """Give every parameter and BatchNorm buffer a random value of a scale that makes each of them matter."""
    g = torch.Generator().manual_seed(seed)

    def rand(t: torch.Tensor, std: float, mean: float = 0.0) -> None:
        t.copy_(mean + std * torch.randn(t.shape, generator=g))

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                rand(m.weight, m.weight[0].numel()**-0.5)
                if m.bias is not None:
                    rand(m.bias, 0.1)
            elif isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
                rand(m.weight, 0.2, mean=1.0)
                rand(m.bias, 0.2)
            if isinstance(m, nn.BatchNorm2d):
                rand(m.running_mean, 0.2)
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
                m.num_batches_tracked.fill_(7)
        for name, p in model.named_parameters():
            if name.endswith('cls_token'):
                rand(p, 1.0)


def official_from_hf(hf_sd: dict) -> dict:
    """HF -> microsoft/CvT names, written independently of the converter (plain string replacement)."""
    out = {}
    for k, v in hf_sd.items():
        k = k.removeprefix('cvt.')
        k = re.sub(r'^encoder\.stages\.(\d+)\.', r'stage\1.', k)
        for a, b in [
            ('embedding.convolution_embeddings.projection', 'patch_embed.proj'),
            ('embedding.convolution_embeddings.normalization', 'patch_embed.norm'),
            ('.layers.', '.blocks.'),
            ('layernorm_before', 'norm1'),
            ('layernorm_after', 'norm2'),
            ('attention.attention.convolution_projection_query.convolution_projection.convolution', 'attn.conv_proj_q.conv'),
            ('attention.attention.convolution_projection_key.convolution_projection.convolution', 'attn.conv_proj_k.conv'),
            ('attention.attention.convolution_projection_value.convolution_projection.convolution', 'attn.conv_proj_v.conv'),
            ('attention.attention.convolution_projection_query.convolution_projection.normalization', 'attn.conv_proj_q.bn'),
            ('attention.attention.convolution_projection_key.convolution_projection.normalization', 'attn.conv_proj_k.bn'),
            ('attention.attention.convolution_projection_value.convolution_projection.normalization', 'attn.conv_proj_v.bn'),
            ('attention.attention.projection_query', 'attn.proj_q'),
            ('attention.attention.projection_key', 'attn.proj_k'),
            ('attention.attention.projection_value', 'attn.proj_v'),
            ('attention.output.dense', 'attn.proj'),
            ('intermediate.dense', 'mlp.fc1'),
            ('output.dense', 'mlp.fc2'),
        ]:
            k = k.replace(a, b)
        if k.startswith('layernorm.'):
            k = 'norm.' + k[len('layernorm.'):]
        if k.startswith('classifier.'):
            k = 'head.' + k[len('classifier.'):]
        out[k] = v
    return out


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item()


@pytest.mark.parametrize('arch', [SMALL_13, SMALL_21], ids=['cvt13-like', 'cvt21-like'])
def test_hf_parity_stage_maps(arch):
    """Every stage map equals HF CvtModel's hidden_states (max|diff| <= 1e-4), non-square input."""
    torch.manual_seed(0)
    with no_init_weights():
        hf = CvtModel(hf_config(arch), add_pooling_layer=False).eval()
    randomize(hf)
    sd = convert_cvt(hf.state_dict(), 'hf')
    assert not any(k.startswith(('norm.', 'head.')) for k in sd)  # CvtModel has neither
    ours = CvT(arch=arch, act='gelu', final_norm=False, out_indices=(0, 1, 2)).eval()
    ours.load_state_dict(sd, strict=True)

    x = torch.randn(2, 3, 64, 80)
    with torch.no_grad():
        ref = hf(x, output_hidden_states=True).hidden_states
        out = ours(x)
    assert len(out) == len(ref) == 3
    for o, r in zip(out, ref):
        assert max_diff(o, r) <= TOL


def test_hf_parity_cvt13_classification():
    """Real CvT-13 config at 64x64: stage maps, final norm and logits equal HF CvtForImageClassification."""
    torch.manual_seed(0)
    with no_init_weights():
        hf = CvtForImageClassification(hf_config(PRESETS['cvt-13'])).eval()
    randomize(hf, seed=1)
    sd = convert_cvt(hf.state_dict(), 'hf')
    head_w, head_b = sd.pop('head.weight'), sd.pop('head.bias')
    assert head_w.shape == (1000, 384)

    with torch.device('meta'):  # skip our init; assign=True takes HF's tensors
        cls_model = CvT(arch='cvt-13', act='gelu', out_type='cls_token').eval()
        fmap_model = CvT(arch='cvt-13', act='gelu', out_indices=(0, 1, 2, 3)).eval()
    cls_model.load_state_dict(sd, strict=True, assign=True)
    fmap_model.load_state_dict(sd, strict=True, assign=True)

    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref = hf(x, output_hidden_states=True)
        (feat, ) = cls_model(x)
        maps = fmap_model(x)
    assert feat.shape == (2, 384)
    assert max_diff(F.linear(feat, head_w, head_b), ref.logits) <= TOL
    r0, r1, r2 = ref.hidden_states
    assert max_diff(maps[0], r0) <= TOL
    assert max_diff(maps[1], r1) <= TOL
    # final_norm=True with 'featmap' normalizes the stage-2 map with the classifier's LayerNorm
    r2_normed = hf.layernorm(r2.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
    assert max_diff(maps[2], r2_normed) <= TOL
    assert max_diff(maps[3], F.max_pool2d(r2_normed, 2)) <= TOL


def test_official_layout_loads_strictly():
    """An official-layout state dict converts as identity and gives the same model as the HF route."""
    torch.manual_seed(0)
    with no_init_weights():
        hf = CvtForImageClassification(hf_config(SMALL_13)).eval()
    randomize(hf)
    official = official_from_hf(hf.state_dict())
    from_official = convert_cvt(official, 'official')
    from_hf = convert_cvt(hf.state_dict(), 'hf')
    assert from_official.keys() == from_hf.keys()
    assert all(torch.equal(from_official[k], from_hf[k]) for k in from_hf)
    assert {'head.weight', 'head.bias', 'norm.weight', 'norm.bias',
            'stage2.blocks.0.attn.conv_proj_k.bn.num_batches_tracked'} <= from_official.keys()

    model = CvT(arch=SMALL_13, act='gelu', out_type='cls_token').eval()
    backbone_sd = {k: v for k, v in from_official.items() if not k.startswith('head.')}
    model.load_state_dict(backbone_sd, strict=True)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        logits = F.linear(model(x)[0], from_official['head.weight'], from_official['head.bias'])
        assert max_diff(logits, hf(x).logits) <= TOL


def test_converter_errors_name_keys_and_source():
    torch.manual_seed(0)
    hf_sd = CvtModel(hf_config(SMALL_13), add_pooling_layer=False).state_dict()
    with pytest.raises(ValueError, match='unknown CvT checkpoint source'):
        convert_cvt(hf_sd, 'timm')
    with pytest.raises(ValueError, match=r"pass source='hf'"):
        convert_cvt(hf_sd, 'official')
    official = official_from_hf(hf_sd)
    with pytest.raises(ValueError, match=r"pass source='official'"):
        convert_cvt(official, 'hf')
    with pytest.raises(ValueError, match=r'module\.stage0\.patch_embed\.proj\.weight'):
        convert_cvt({'module.' + k: v for k, v in official.items()}, 'official')


def test_quick_gelu_matches_hf():
    x = torch.linspace(-6, 6, 101)
    assert max_diff(QuickGELU()(x), QuickGELUActivation()(x)) <= 1e-6


@pytest.mark.parametrize('arch,paper_millions', [('cvt-13', 20), ('cvt-21', 32), ('cvt-w24', 277)])
def test_param_count_matches_paper_and_hf(arch, paper_millions):
    """Backbone + final norm + Linear(C, 1000) head: exactly HF CvtForImageClassification's count for the preset, and
    the paper's Table 2 count to its printed precision (CvT-21: 31.62M for the printed "32M")."""
    with torch.device('meta'):
        model = CvT(arch=arch, out_type='cls_token')
        head = nn.Linear(model.embed_dims[-1], 1000)
    with no_init_weights():  # HF's CvT cannot be built on meta (it calls .item()); allocation without init is cheap
        hf = CvtForImageClassification(hf_config(PRESETS[arch]))
    n = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in head.parameters())
    assert n == sum(p.numel() for p in hf.parameters())
    assert round(n / 1e6) == paper_millions, n
    assert abs(n - paper_millions * 1e6) / (paper_millions * 1e6) <= 0.012, n


def test_level_3_pools_level_2_and_cls_token_output():
    torch.manual_seed(0)
    model = CvT(arch=SMALL_13, out_indices=(2, 3)).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        outs = model(x)
    assert torch.equal(outs[1], F.max_pool2d(outs[0], 2))

    model.out_type = 'cls_token'
    with torch.no_grad():
        (feat, ) = model(x)
    assert feat.shape == (2, 48)
    with pytest.raises(ValueError, match='out_indices'):
        CvT(arch=SMALL_13, out_indices=(4, ))
    with pytest.raises(ValueError, match='unknown CvT arch'):
        CvT(arch='cvt-99')


def test_frozen_stages_and_norm_eval():
    model = CvT(arch=SMALL_13, frozen_stages=1, norm_eval=True)
    model.train()
    assert not any(p.requires_grad for n, p in model.named_parameters() if n.startswith(('stage0.', 'stage1.')))
    assert all(p.requires_grad for n, p in model.named_parameters() if n.startswith(('stage2.', 'norm.')))
    assert not model.stage1.training and model.stage2.training
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
    assert model.stage2.blocks[0].norm1.training


def test_mmpretrain_image_classifier_integration():
    """``type='beit_mm.CvT'`` with out_type='cls_token' feeds mmpretrain's LinearClsHead, and the classifier's
    ``get_layer_depth`` (used by its layer-decay constructor) reaches ours with the 'backbone.' prefix."""
    from mmpretrain.registry import MODELS as MMPRETRAIN_MODELS

    torch.manual_seed(0)
    classifier = MMPRETRAIN_MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='beit_mm.CvT', arch=SMALL_13, out_type='cls_token'),
            head=dict(type='LinearClsHead', num_classes=10, in_channels=48))).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        logits = classifier(x, mode='tensor')
        expected = classifier.head.fc(classifier.backbone(x)[0])
    assert logits.shape == (2, 10)
    assert max_diff(logits, expected) == 0
    num_layers = sum(SMALL_13['depths']) + 2
    assert classifier.get_layer_depth('backbone.stage1.blocks.1.attn.proj.weight') == (3, num_layers)
    assert classifier.get_layer_depth('head.fc.weight') == (num_layers - 1, num_layers)
