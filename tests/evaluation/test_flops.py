"""The FLOP counter (``beit_mm.evaluation.flops``) and its CLI ``tools/analysis/get_flops.py``: docs/cvt.md's
CvT-13/CvT-21 GFLOPs and parameter counts (its CvT table, read at test time), and one segmentor, classifier and MIM
model counted end to end."""
import os.path as osp
import re

import pytest
import torch

from beit_mm.evaluation import flops

from ..conftest import ROOT, run_tool


def _readme_cvt(arch: str) -> tuple[str, str]:
    """(params, GFLOPs @224) strings of docs/cvt.md's CvT table row."""
    text = open(osp.join(ROOT, 'docs', 'cvt.md')).read()
    row = re.search(rf'^\| {re.escape(arch)} \|(.*)$', text, re.M)
    assert row, f'docs/cvt.md has no CvT table row for {arch}'
    cells = [c.strip() for c in row.group(1).split('|')]
    return cells[0], cells[2]


def _get_flops(*args: str) -> dict:
    proc = run_tool(['tools/analysis/get_flops.py', *args])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = dict(re.findall(r'^(Model|Input shape|Flops|Params|Flops \(exact\)|Params \(exact\)): (.*)$', proc.stdout,
                          re.M))
    assert {'Flops', 'Params'} <= set(out), proc.stdout
    return out


@pytest.mark.parametrize('arch,config', [('CvT-13', 'configs/cvt/cvt-13_8xb256-300e_in1k.py'),
                                         ('CvT-21', 'configs/cvt/cvt-21_8xb128-300e_in1k.py')])
def test_cvt_flops_and_params_match_readme(arch, config):
    """The classifier (backbone + norm + 1000-class head) at 224x224: GFLOPs to the table's 2 decimals, params to
    its 2 decimals (docs/cvt.md: CvT-13 4.58 / 20.00M, CvT-21 7.21 / 31.62M; paper 4.5 / 7.1)."""
    params, gflops = _readme_cvt(arch)
    out = _get_flops(config, '--shape', '224', '224')
    assert out['Model'].startswith('classifier')
    assert f'{int(out["Flops (exact)"]) / 1e9:.2f}' == gflops
    assert f'{int(out["Params (exact)"]) / 1e6:.2f}M' == params


def test_segmentor_and_mim_counts():
    """A segmentor at its crop, and the MIM training forward counted as the tokenizer's plus the masked backbone's plus
    the head's at every patch, each counted alone here."""
    from mmengine.analysis import FlopAnalyzer
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    seg_cfg = Config.fromfile(osp.join(ROOT, 'tests/configs/tiny_beit_upernet_ade_demo.py'))
    seg = build_from_config(seg_cfg, drop_auxiliary_head=True)
    assert flops.model_kind(seg) == 'segmentor' and flops.default_shape(seg_cfg, 'segmentor') == (64, 64)
    assert flops.complexity(seg, (64, 64))['flops'] > 0

    mim = build_from_config(Config.fromfile(osp.join(ROOT, 'configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')))
    result = flops.complexity(mim, (96, 96))
    assert result['kind'] == 'mim'
    images, target, mask = flops.mim_inputs(mim, 96, 96)
    assert int(mask.sum()) == round(0.4 * 36) and target.shape[-1] == 48

    def count(module, method, *inputs):
        class Wrap(torch.nn.Module):  # the module is a submodule, so the trace sees its weights as parameters
            def __init__(self):
                super().__init__()
                self.inner = module

            def forward(self, *x):
                return getattr(self.inner, method)(*x)
        return FlopAnalyzer(Wrap(), inputs).set_op_handle('aten::scaled_dot_product_attention',
                                                          flops.sdpa_flop_jit).total()

    with torch.no_grad():
        parts = (count(mim.target_generator, 'get_token_ids', target) +
                 count(mim, 'extract_feat', images, mask) +
                 count(mim.head.lm_head, 'forward', torch.zeros(mask.numel(), mim.head.embed_dims)))
    assert result['flops'] == parts
    with torch.no_grad():
        assert result['tokenizer_flops'] == count(mim.target_generator, 'get_token_ids', target) > 0


def test_sdpa_handle_counts_what_the_eager_path_counts():
    """The SDPA op handle gives the same total as MMEngine's own matmul counting on the eager attention path."""
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    totals = []
    for impl in ('sdpa', 'eager'):
        cfg = Config.fromfile(osp.join(ROOT, 'configs/cvt/cvt-13_8xb256-300e_in1k.py'))
        cfg.model.backbone.attn_impl = impl
        totals.append(flops.complexity(build_from_config(cfg), (64, 64))['flops'])
    assert totals[0] == totals[1] > 0


def test_mask2former_counts_its_head_and_masked_attention_products():
    """mmseg's Mask2FormerHead is counted (the model costs more than backbone and neck), and ``aten::baddbmm`` counts
    the masked cross-attention's ``q @ k^T`` as MMEngine counts ``bmm``."""
    from mmengine.analysis import FlopAnalyzer
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    model = build_from_config(Config.fromfile(osp.join(
        ROOT, 'configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')))
    whole = flops.complexity(model, (64, 64))['flops']

    class Features(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            return self.inner.extract_feat(x)
    with torch.no_grad():
        features = FlopAnalyzer(Features(), (torch.randn(1, 3, 64, 64), )).set_op_handle(
            'aten::scaled_dot_product_attention', flops.sdpa_flop_jit).total()
    assert whole > 2 * features > 0

    class Baddbmm(torch.nn.Module):
        def forward(self, x, a, b):
            return torch.baddbmm(x, a, b)
    with torch.no_grad():
        got = FlopAnalyzer(Baddbmm(), (torch.zeros(3, 5, 7), torch.randn(3, 5, 4), torch.randn(3, 4, 7))).set_op_handle(
            'aten::baddbmm', flops.baddbmm_flop_jit).total()
    assert got == 3 * 5 * 4 * 7
