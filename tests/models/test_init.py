"""unilm BEiT's initialization, checked statistically on freshly built BEiT-B-sized models.

The rule, written from microsoft/unilm ``beit/`` (not from beit_mm's code):

- ``beit/modeling_pretrain.py``: ``trunc_normal_`` with ``a=-std, b=std``, ``init_std=0.02`` on ``pos_embed``,
  ``cls_token``, ``mask_token``, ``lm_head.weight``; ``_init_weights`` (Linear, LayerNorm, Conv2d) and
  ``fix_init_weight()`` (``attn.proj``/``mlp.fc2`` weights divided by ``sqrt(2 * (layer_id + 1))``).
- ``beit/modeling_finetune.py``: timm's ``trunc_normal_`` (bounds -2, 2) with std .02 on ``pos_embed``, ``cls_token``,
  ``head.weight``, Linear and LayerNorm only (the patch conv keeps PyTorch's default), and ``fix_init_weight()``.
- both: relative position bias tables at zero, layer scales at ``init_values``.

Checks: every value within the truncation bounds; sample std within 3% of the truncated normal's."""
import math
import re

import pytest
import torch
from torch import nn

from beit_mm.models.backbones import BEiT
from beit_mm.models.heads import BEiTMIMHead, PixelRegressionHead
from beit_mm.models.layers.weight_init import truncated_std

STD = 0.02
REL_TOL = 0.03


def check_trunc_normal(t: torch.Tensor, std: float, bound: float, what: str) -> None:
    assert t.abs().max() <= bound + 1e-7, (what, t.abs().max().item(), bound)
    expected = truncated_std(std, bound)
    assert abs(t.std().item() / expected - 1) < REL_TOL, (what, t.std().item(), expected)
    assert abs(t.mean().item()) < 4 * expected / math.sqrt(t.numel()), what


def build(init_mode: str) -> BEiT:
    torch.manual_seed(0)
    model = BEiT(arch='base', img_size=224, use_shared_rel_pos_bias=init_mode == 'pretrain',
                 use_rel_pos_bias=init_mode == 'finetune', with_mask_token=init_mode == 'pretrain', final_norm=True,
                 layer_scale_init_value=0.1, init_mode=init_mode)
    model.init_weights()
    return model


def test_truncated_std_formula():
    """The closed form against a sample of torch's truncated normal (1e6 values)."""
    torch.manual_seed(0)
    sample = nn.init.trunc_normal_(torch.empty(10**6), std=1.0, a=-1.0, b=1.0)
    assert abs(sample.std().item() / truncated_std(1.0, 1.0) - 1) < 5e-3
    assert abs(truncated_std(0.02, 0.02) - 0.0108) < 1e-4 and abs(truncated_std(0.02, 2.0) - 0.02) < 1e-9


@pytest.mark.parametrize('init_mode', ['pretrain', 'finetune'])
def test_beit_base_matches_unilm_rule(init_mode):
    model = build(init_mode)
    bound = STD if init_mode == 'pretrain' else 2.0  # modeling_pretrain trunc_normal_ vs timm's
    params = dict(model.named_parameters())
    tokens = [n for n in ('cls_token', 'mask_token') if n in params]
    check_trunc_normal(torch.cat([params[n].flatten() for n in tokens]), STD, bound, tokens)
    for kind in ('attn.qkv.weight', 'mlp.fc1.weight'):
        check_trunc_normal(torch.cat([params[f'blocks.{i}.{kind}'].flatten() for i in range(12)]), STD, bound, kind)
    for i in (0, 5, 11):  # fix_init_weight: divided by sqrt(2 (i + 1))
        for kind in ('attn.proj.weight', 'mlp.fc2.weight'):
            scale = math.sqrt(2.0 * (i + 1))
            check_trunc_normal(params[f'blocks.{i}.{kind}'] * scale, STD, bound, (i, kind))
    biases = [n for n, p in params.items() if n.endswith('.bias') and not n.startswith('patch_embed')]
    assert all(torch.count_nonzero(params[n]) == 0 for n in biases if 'norm' not in n)
    for name, p in params.items():
        if 'norm' in name:
            assert torch.equal(p, torch.ones_like(p) if name.endswith('weight') else torch.zeros_like(p)), name
        if name.endswith(('q_bias', 'v_bias', 'relative_position_bias_table')):
            assert torch.count_nonzero(p) == 0, name
        if name.endswith(('gamma_1', 'gamma_2')):
            assert torch.equal(p, torch.full_like(p, 0.1)), name
    conv_w, conv_b = params['patch_embed.proj.weight'], params['patch_embed.proj.bias']
    if init_mode == 'pretrain':  # _init_weights' Conv2d branch
        check_trunc_normal(conv_w, STD, STD, 'patch_embed')
        assert torch.count_nonzero(conv_b) == 0
    else:  # PyTorch's Conv2d default: kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        fan_in = 3 * 16 * 16
        assert conv_w.abs().max() <= 1 / math.sqrt(fan_in) + 1e-7
        assert abs(conv_w.std().item() / (1 / math.sqrt(3 * fan_in)) - 1) < REL_TOL
        assert torch.count_nonzero(conv_b) > 0


def test_mim_heads_use_the_pretraining_rule():
    torch.manual_seed(0)
    head = BEiTMIMHead(768, 8192)
    head.init_weights()
    check_trunc_normal(head.lm_head.weight, STD, STD, 'lm_head')  # modeling_pretrain: trunc_normal_(lm_head.weight)
    assert torch.count_nonzero(head.lm_head.bias) == 0
    pixel = PixelRegressionHead(768, 16)
    pixel.init_weights()
    check_trunc_normal(pixel.decoder.weight, STD, STD, 'pixel decoder')
    assert torch.count_nonzero(pixel.decoder.bias) == 0


def test_unknown_init_mode_is_refused():
    with pytest.raises(ValueError, match="init_mode='timm'.*modeling_finetune"):
        BEiT(arch=dict(embed_dims=8, num_layers=1, num_heads=1, mlp_ratio=1.0), img_size=32, init_mode='timm')


def test_keep_init_loads_the_rest_and_leaves_the_named_weights_at_random_init(tmp_path):
    """``init_cfg.keep_init``: named weights keep the random init, all others equal the checkpoint's; a pattern
    matching nothing is refused; without it nothing changes."""
    arch = dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0)
    torch.manual_seed(0)
    source = BEiT(arch=arch, img_size=32, patch_size=8, layer_scale_init_value=0.1)
    with torch.no_grad():  # trained-looking weights: no value equals the random init by chance
        for p in source.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    path = str(tmp_path / 'backbone.pth')
    torch.save(source.state_dict(), path)

    def load(keep_init):
        torch.manual_seed(1)
        model = BEiT(arch=arch, img_size=32, patch_size=8, layer_scale_init_value=0.1,
                     init_cfg=dict(type='Pretrained', checkpoint=path, keep_init=keep_init))
        model.init_weights()
        return model.state_dict()

    want = source.state_dict()
    loaded = load([r'^blocks\.1\.', 'gamma_'])
    kept = {k for k in want if k.startswith('blocks.1.') or 'gamma_' in k}
    assert len(kept) > 10
    for name, value in loaded.items():
        if name in kept:
            assert not torch.equal(value, want[name]), name
        else:
            assert torch.equal(value, want[name]), name
    assert torch.all(loaded['blocks.0.gamma_1'] == 0.1)  # layer scale back at its init value
    assert torch.count_nonzero(loaded['blocks.1.attn.relative_position_bias_table']) == 0  # tables start at zero
    check_trunc_normal(loaded['blocks.1.mlp.fc1.weight'], STD, 2.0, 'kept block fc1')  # modeling_finetune rule
    assert all(torch.equal(v, want[k]) for k, v in load([]).items())
    with pytest.raises(ValueError, match=re.escape(r"keep_init pattern 'blocks\.9\.' matches none")):
        load([r'blocks\.9\.'])
