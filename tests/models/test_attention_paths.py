"""BEiT attention kernels compute the same function: eager (unilm ``beit/modeling_finetune.py`` ``Attention.forward``),
SDPA, ``'auto'``, ``'flex'`` and, on CUDA, ``'cudnn'``. ``BEIT_MM_TEST_DEVICE=cuda`` runs them on a GPU; on CPU
FlexAttention is checked forward only (no CPU backward in torch 2.13)."""
import os

import pytest
import torch
import torch.nn.functional as F

from beit_mm.models.backbones import BEiT
from beit_mm.models.layers import BEiTAttention, gather_relative_position_bias
from beit_mm.models.layers.attention import select_attn_impl
from beit_mm.models.layers.rel_pos_bias import num_relative_distance

from ..conftest import assert_close_to_scale, randomize_

DEVICE = torch.device(os.environ.get('BEIT_MM_TEST_DEVICE', 'cpu'))
# kernels compared with eager: (impl, trains here); FlexAttention has no CPU backward, cuDNN attention no CPU kernel
KERNELS = [('sdpa', True), ('auto', True), ('flex', DEVICE.type == 'cuda')] + (
    [('cudnn', True)] if DEVICE.type == 'cuda' else [])


def _kernels(train: bool) -> list[str]:
    return [impl for impl, trains in KERNELS if trains or not train]


@pytest.mark.parametrize('grid', [(4, 5), (2, 3), (7, 7)])  # N = 21, 7, 50: none a multiple of 8
def test_aligned_bias_gather_equals_plain(grid):
    """align=8 gives bit-identical values with a row stride that is a multiple of 8, and the same gradient."""
    table = torch.randn(num_relative_distance(grid), 3, device=DEVICE, requires_grad=True)
    plain = gather_relative_position_bias(table, grid)
    aligned = gather_relative_position_bias(table, grid, align=8)
    n = grid[0] * grid[1] + 1
    assert plain.shape == aligned.shape == (3, n, n)
    assert aligned.stride(1) % 8 == 0 and aligned.stride(0) % 8 == 0 and aligned.stride(2) == 1
    assert aligned.stride(1) != n  # really padded
    assert torch.equal(plain, aligned)
    w = torch.randn(3, n, n, device=DEVICE)
    g_plain, = torch.autograd.grad((plain * w).sum(), table)
    g_aligned, = torch.autograd.grad((aligned * w).sum(), table)
    assert torch.allclose(g_plain, g_aligned, atol=1e-6)


def _attention_outputs(impl, state, shared_table, x, grid, train):
    attn = BEiTAttention(16, 4, grid=(4, 4), attn_impl=impl).to(DEVICE)
    attn.load_state_dict(state)
    x = x.clone().requires_grad_(train)
    table = shared_table.clone().requires_grad_(train)
    if train:
        out = attn(x, grid, table)
        out.square().sum().backward()
        return [out.detach(), x.grad, table.grad] + [p.grad for p in attn.parameters()]
    with torch.no_grad():
        return [attn(x, grid, table)]


@pytest.mark.parametrize('train', [True, False])
@pytest.mark.parametrize('grid', [(4, 4), (5, 7)])  # the table's own grid, and a resampled non-square one
def test_attention_kernels_equal(train, grid):
    """eager, SDPA (8-aligned bias), auto and flex (forward only on CPU): outputs and every gradient (input, shared
    table, own table, q/v bias, weights) within 1e-5 of each tensor's magnitude in fp32 (``FP32_KERNEL_RTOL``), with a
    per-block table plus a shared one."""
    ref = randomize_(BEiTAttention(16, 4, grid=(4, 4)), seed=1).to(DEVICE)
    state = ref.state_dict()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, grid[0] * grid[1] + 1, 16, generator=g).to(DEVICE)
    shared = torch.randn(num_relative_distance(grid), 4, generator=g).to(DEVICE)
    outs = {impl: _attention_outputs(impl, state, shared, x, grid, train) for impl in ['eager'] + _kernels(train)}
    names = ['out', 'x.grad', 'shared_table.grad'] + [f'{n}.grad' for n, _ in BEiTAttention(16, 4, grid=(4, 4)).named_parameters()]
    for impl in _kernels(train):
        for name, a, b in zip(names, outs['eager'], outs[impl]):
            assert_close_to_scale(b, a, what=f'{impl} {name}')


def test_backbone_kernels_equal_in_training():
    """Whole BEiT in the pretraining layout (shared bias, mask token, drop path off): loss and all gradients agree."""
    kw = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=4, mlp_ratio=2.0), img_size=48, patch_size=8,
              use_rel_pos_bias=False, use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True,
              drop_path_rate=0.0)
    x = torch.randn(2, 3, 48, 64, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    mask = (torch.rand(2, 6, 8, generator=torch.Generator().manual_seed(1)) < 0.4).to(DEVICE)
    grads = {}
    state = randomize_(BEiT(**kw)).state_dict()
    for impl in ['eager'] + _kernels(True):
        m = BEiT(attn_impl=impl, **kw).to(DEVICE)
        m.load_state_dict(state)
        out = m(x, mask)[0]
        out.square().mean().backward()
        grads[impl] = [out.detach()] + [p.grad for p in m.parameters()]
    names = ['out'] + [f'{n}.grad' for n, _ in BEiT(**kw).named_parameters()]
    for impl in _kernels(True):
        for name, a, b in zip(names, grads['eager'], grads[impl]):
            assert_close_to_scale(b, a, what=f'{impl} {name}')


@pytest.mark.skipif(DEVICE.type != 'cpu', reason='CPU kernel choice')
def test_auto_runs_the_kernel_of_the_table(monkeypatch):
    """On CPU, 'auto' avoids SDPA when gradients are needed (its backward with a float bias is the slow one) and uses
    it for inference."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, 'scaled_dot_product_attention', lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    attn = BEiTAttention(16, 4, grid=(4, 4))
    x = torch.randn(1, 17, 16, requires_grad=True)
    attn(x, (4, 4)).sum().backward()
    assert calls == [] and select_attn_impl('cpu', True) == 'eager'
    with torch.no_grad():
        attn(x, (4, 4))
    assert calls == [1] and select_attn_impl('cpu', False) == 'sdpa'
    assert select_attn_impl('cuda', True) == 'sdpa'


def test_auto_table_on_cuda():
    """CUDA: cuDNN attention for bf16/fp16 inference without a mask, SDPA for training (cuDNN refuses a bias that needs
    a gradient), for fp32 and wherever EoMT's attention mask is given."""
    assert select_attn_impl('cuda', False, torch.bfloat16) == 'cudnn'
    assert select_attn_impl('cuda', False, torch.float16) == 'cudnn'
    assert select_attn_impl('cuda', True, torch.bfloat16) == 'sdpa'
    assert select_attn_impl('cuda', False, torch.float32) == 'sdpa'
    assert select_attn_impl('cuda', False, torch.bfloat16, masked=True) == 'sdpa'
    assert select_attn_impl('cpu', False, torch.bfloat16) == 'sdpa'


def test_bf16_autocast_kernels_close():
    """Under bf16 autocast the SDPA and eager paths agree to bf16 precision (2e-2 of the output's scale)."""
    ref = randomize_(BEiTAttention(32, 4, grid=(4, 4)), seed=3).to(DEVICE)
    x = torch.randn(2, 17, 32, generator=torch.Generator().manual_seed(4)).to(DEVICE)
    outs = {}
    for impl in ('eager', 'sdpa'):
        attn = BEiTAttention(32, 4, grid=(4, 4), attn_impl=impl).to(DEVICE)
        attn.load_state_dict(ref.state_dict())
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16), torch.no_grad():
            outs[impl] = attn(x, (4, 4)).float()
    assert outs['eager'].dtype == torch.float32
    assert (outs['eager'] - outs['sdpa']).abs().max() <= 2e-2 * outs['eager'].abs().max()


def test_bias_cast_after_gather_keeps_alignment_and_fp32_gradient():
    """The bf16 bias keeps the 8-aligned layout, and the table's gradient is accumulated in fp32: equal to the fp32
    gather's gradient for the same bf16 upstream gradient."""
    grid = (5, 5)
    table = torch.randn(num_relative_distance(grid), 2, device=DEVICE, requires_grad=True)
    bias = gather_relative_position_bias(table, grid, align=8, dtype=torch.bfloat16)
    assert bias.dtype == torch.bfloat16 and bias.stride(1) % 8 == 0
    w = torch.randn(bias.shape, device=DEVICE).to(torch.bfloat16)
    grad, = torch.autograd.grad((bias * w).float().sum(), table)
    ref, = torch.autograd.grad((gather_relative_position_bias(table, grid) * w.float()).sum(), table)
    assert grad.dtype == torch.float32 and torch.allclose(grad, ref, atol=1e-5)


@pytest.mark.parametrize('train', [True, False])
def test_masked_attention_with_queries_equal(train):
    """EoMT's attention: K queries in front taking the cls token's bias rows and columns, and a (B, T, T) mask
    (True = may attend) that hides patches from queries: every kernel equals eager (fp32, ``FP32_KERNEL_RTOL``)."""
    grid, k = (3, 4), 5
    ref = randomize_(BEiTAttention(16, 4, grid=grid), seed=5).to(DEVICE)
    g = torch.Generator().manual_seed(6)
    t = k + 1 + grid[0] * grid[1]
    x = torch.randn(2, t, 16, generator=g).to(DEVICE)
    mask = torch.ones(2, t, t, dtype=torch.bool)
    mask[:, :k, k + 1:] = torch.rand(2, k, t - k - 1, generator=g) < 0.5
    mask = mask.to(DEVICE)
    outs = {}
    for impl in ['eager'] + _kernels(train):
        attn = BEiTAttention(16, 4, grid=grid, attn_impl=impl).to(DEVICE)
        attn.load_state_dict(ref.state_dict())
        xi = x.clone().requires_grad_(train)
        with torch.set_grad_enabled(train):
            out = attn(xi, grid, num_queries=k, attn_mask=mask)
        if train:
            out.square().sum().backward()
            outs[impl] = [out.detach(), xi.grad, attn.relative_position_bias_table.grad]
        else:
            outs[impl] = [out]
    for impl in _kernels(train):
        for name, a, b in zip(['out', 'x.grad', 'table.grad'], outs['eager'], outs[impl]):
            assert_close_to_scale(b, a, what=f'{impl} {name}')


def test_flex_refuses_attention_dropout():
    with pytest.raises(ValueError, match="no attention dropout"):
        BEiTAttention(16, 4, grid=(4, 4), attn_drop=0.1, attn_impl='flex')


@pytest.mark.parametrize('train', [True, False])
def test_bf16_kernels_against_fp32(train):
    """Under bf16 autocast every kernel of the device (SDPA; on CUDA also flex and cuDNN) is no less accurate than
    eager in bf16: its error against fp32 eager on the output and the input and bias-table gradients is at most
    max(2e-2 of the values' scale, twice bf16 eager's) (the bound of ``benchmark_attention.py --check``)."""
    ref = randomize_(BEiTAttention(32, 4, grid=(4, 4)), seed=7).to(DEVICE)
    x = torch.randn(2, 17, 32, generator=torch.Generator().manual_seed(8)).to(DEVICE)

    def run(impl, dtype):
        attn = BEiTAttention(32, 4, grid=(4, 4), attn_impl=impl).to(DEVICE)
        attn.load_state_dict(ref.state_dict())
        xi = x.clone().requires_grad_(train)
        with torch.autocast(DEVICE.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None), \
                torch.set_grad_enabled(train):
            out = attn(xi, (4, 4))
        if not train:
            return [out.float()]
        out.float().square().mean().backward()
        return [out.detach().float(), xi.grad.float(), attn.relative_position_bias_table.grad.float()]

    fp32 = run('eager', None)
    scales = [t.abs().max().item() for t in fp32]
    eager_err = [(a - b).abs().max().item() / s for a, b, s in zip(run('eager', torch.bfloat16), fp32, scales)]
    for impl in ['sdpa'] + (['flex', 'cudnn'] if DEVICE.type == 'cuda' else []):
        err = [(a - b).abs().max().item() / s for a, b, s in zip(run(impl, torch.bfloat16), fp32, scales)]
        for name, e, ee in zip(['out', 'x.grad', 'table.grad'], err, eager_err):
            assert e <= max(2e-2, 2 * ee), f'{impl} {name}: {e:.2e} vs bf16 eager {ee:.2e}'


@pytest.mark.skipif(DEVICE.type != 'cpu', reason='injects a compile failure into the CPU probe')
@pytest.mark.parametrize('train', [True, False])
def test_flex_that_does_not_compile_falls_back_to_sdpa(monkeypatch, train):
    """A FlexAttention that fails to compile (as inductor's bf16 backward tiles on an H200: "out of resource: shared
    memory") is probed once: one warning naming the failure, then SDPA; the step's loss and gradients equal SDPA's."""
    from beit_mm.models.layers import attention

    def refuse(*args, **kwargs):
        raise RuntimeError('No valid triton configs. OutOfMemoryError: out of resource: shared memory, Required: '
                           '278528 Hardware limit: 232448')

    monkeypatch.setattr(attention, 'PROBED_DEVICES', ('cuda', 'cpu'))
    monkeypatch.setattr(attention, '_compiled_flex_attention', refuse)
    attention._flex_plan.cache_clear()
    ref = randomize_(BEiTAttention(16, 4, grid=(4, 4)), seed=9)
    x = torch.randn(2, 17, 16, generator=torch.Generator().manual_seed(10))
    results = {}
    with pytest.warns(UserWarning) as caught:
        for impl in ('flex', 'flex', 'sdpa'):  # twice: the probe's answer is kept, the warning said once
            attn = BEiTAttention(16, 4, grid=(4, 4), attn_impl=impl)
            attn.load_state_dict(ref.state_dict())
            xi = x.clone().requires_grad_(train)
            with torch.set_grad_enabled(train):
                loss = attn(xi, (4, 4)).square().mean()
            if train:
                loss.backward()
            results.setdefault(impl, []).append([loss.detach()] + ([xi.grad] if train else []))
    attention._flex_plan.cache_clear()
    flex_warnings = [str(w.message) for w in caught if "attn_impl='flex'" in str(w.message)]
    assert len(flex_warnings) == 1 and 'Hardware limit: 232448' in flex_warnings[0], flex_warnings
    assert 'uses SDPA' in flex_warnings[0]
    for got in results['flex']:
        for a, b in zip(got, results['sdpa'][0]):
            assert torch.equal(a, b)
