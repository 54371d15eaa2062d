"""``--amp`` (:mod:`beit_mm.engine.run_options`) picks the precision that is faster on the device (capability checks
mocked), and AdamW is fused where torch has the kernel."""

import pytest
import torch
from mmengine.config import Config

from beit_mm.engine import amp_optim_wrapper
from beit_mm.engine import run_options as amp
from beit_mm.engine.run_options import use_fused_adamw

AVX2_ONLY = 'flags\t\t: fpu sse sse2 avx avx2 fma f16c\n'  # e.g. a Haswell-Zen 3 CPU
AVX512_BF16 = 'flags\t\t: fpu sse avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n'  # Cooper Lake, Zen 4/5
AMX = 'flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n'  # Sapphire Rapids


def fake_cpuinfo(monkeypatch, text: str) -> None:
    monkeypatch.delenv(amp_optim_wrapper.EMULATE_AVX2_ENV, raising=False)  # the test runner's AVX2 emulation

    def fake_open(path, *args, **kwargs):
        assert path == '/proc/cpuinfo'
        import io
        return io.StringIO(text)
    monkeypatch.setattr(amp_optim_wrapper, 'open', fake_open, raising=False)


def sgd_cfg() -> Config:
    return Config(dict(optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1))))


@pytest.mark.parametrize('cpuinfo, flags', [(AVX2_ONLY, ()), (AVX512_BF16, ('avx512_bf16', )), (AMX, ('amx_bf16', ))])
def test_cpu_bf16_capability_from_cpuinfo(monkeypatch, cpuinfo, flags):
    fake_cpuinfo(monkeypatch, cpuinfo)
    assert amp_optim_wrapper.cpu_native_bf16_flags() == flags  # named on benchmark.py's device line
    assert amp_optim_wrapper.cpu_has_native_bf16() is bool(flags)


def test_avx2_emulation_decides_as_an_avx2_cpu(monkeypatch):
    """``BEIT_MM_EMULATE_AVX2=1`` (tools/run_tests.sh's AVX2 emulation): no native bf16 whatever /proc/cpuinfo says,
    and the CPU line says it is emulated."""
    fake_cpuinfo(monkeypatch, AVX512_BF16)
    monkeypatch.setenv(amp_optim_wrapper.EMULATE_AVX2_ENV, '1')
    assert amp_optim_wrapper.cpu_native_bf16_flags() == () and amp_optim_wrapper.amp_dtype_for_device('cpu') is None
    assert amp_optim_wrapper.describe_cpu().endswith('(AVX2 emulated)')
    monkeypatch.setenv(amp_optim_wrapper.EMULATE_AVX2_ENV, '0')
    assert amp_optim_wrapper.cpu_native_bf16_flags() == ('avx512_bf16', )
    assert 'native bf16 (avx512_bf16)' in amp_optim_wrapper.describe_cpu()


@pytest.mark.parametrize('cpuinfo, warns', [(AVX2_ONLY, True), (AVX512_BF16, False)])
def test_amp_wrapper_warns_where_bf16_is_emulated(monkeypatch, mm_warnings, cpuinfo, warns):
    """A config's bf16 AmpOptimWrapper on a CPU without native bf16 says that it runs emulated (and how to avoid it)."""
    fake_cpuinfo(monkeypatch, cpuinfo)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    model = torch.nn.Linear(2, 2)
    amp_optim_wrapper.AmpOptimWrapper(dtype='bfloat16', optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert any('bf16 is emulated here' in m for m in mm_warnings) is warns, mm_warnings


def test_amp_keeps_fp32_on_cpu_without_bf16(monkeypatch, capsys):
    """AVX2-only CPU: bf16 would be emulated (~70x slower), so --amp keeps the plain fp32 OptimWrapper with a notice."""
    fake_cpuinfo(monkeypatch, AVX2_ONLY)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    cfg = sgd_cfg()
    amp.enable_amp(cfg)
    assert cfg.optim_wrapper.type == 'OptimWrapper' and 'dtype' not in cfg.optim_wrapper
    assert amp_optim_wrapper.amp_dtype_for_device('cpu') is None


def test_amp_bf16_on_cpu_with_native_bf16(monkeypatch):
    fake_cpuinfo(monkeypatch, AVX512_BF16)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    cfg = sgd_cfg()
    amp.enable_amp(cfg)
    assert (cfg.optim_wrapper.type, cfg.optim_wrapper.dtype) == ('beit_mm.AmpOptimWrapper', 'bfloat16')


@pytest.mark.parametrize('bf16, expected', [(True, ('bfloat16', None)), (False, ('float16', 'dynamic'))])
def test_amp_on_gpus(monkeypatch, bf16, expected):
    """Ampere and later: bf16 without loss scaling; older GPUs (V100, T4): fp16 with dynamic loss scaling."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda *a, **k: bf16)
    cfg = sgd_cfg()
    amp.enable_amp(cfg)
    assert (cfg.optim_wrapper.dtype, cfg.optim_wrapper.get('loss_scale')) == expected


def test_fused_adamw_where_supported(monkeypatch):
    """AdamW gets fused=True on CPU (torch 2.13 has the kernel); a config's own fused/foreach and other optimizers
    are left alone; the fused optimizer steps like the unfused one."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    cfg = Config(dict(optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3))))
    use_fused_adamw(cfg)
    assert cfg.optim_wrapper.optimizer.fused is True
    for optimizer in (dict(type='AdamW', lr=1e-3, foreach=True), dict(type='SGD', lr=0.1)):
        cfg = Config(dict(optim_wrapper=dict(type='OptimWrapper', optimizer=dict(optimizer))))
        use_fused_adamw(cfg)
        assert 'fused' not in cfg.optim_wrapper.optimizer
    params = [torch.nn.Parameter(torch.randn(5, 3, generator=torch.Generator().manual_seed(0))) for _ in range(2)]
    params[1].data.copy_(params[0].data)
    opts = [torch.optim.AdamW([params[0]], lr=1e-2), torch.optim.AdamW([params[1]], lr=1e-2, fused=True)]
    for _ in range(3):
        for p, opt in zip(params, opts):
            p.grad = torch.ones_like(p) * p.detach().sum()
            opt.step()
    assert torch.allclose(params[0], params[1], atol=1e-6)


# ------------------------------------------------------------------------------ dtype='auto' (the full-size configs)
@pytest.mark.parametrize('device, cpuinfo, bf16_gpu, dtype, scaled', [
    ('cuda', AVX2_ONLY, True, torch.bfloat16, False),  # Ampere and later: bf16, no loss scaling
    ('cuda', AVX2_ONLY, False, torch.float16, True),  # V100, T4: fp16 with dynamic loss scaling
    ('cpu', AVX512_BF16, False, torch.bfloat16, False),  # native bf16 (Cooper Lake, Zen 4/5)
    ('cpu', AMX, False, torch.bfloat16, False),  # AMX-BF16 (Sapphire Rapids)
    ('cpu', AVX2_ONLY, False, None, False),  # bf16 would be emulated (~70x slower): fp32, no autocast
], ids=['cuda-bf16', 'cuda-no-bf16', 'cpu-avx512-bf16', 'cpu-amx', 'cpu-avx2'])
def test_auto_dtype_resolves_per_device(monkeypatch, device, cpuinfo, bf16_gpu, dtype, scaled):
    """``AmpOptimWrapper(dtype='auto')`` takes the dtype of :func:`amp_dtype_for_device` (the one that ``tools/train.py
    --amp`` takes) and scales the loss exactly where that dtype is fp16 (device queries mocked)."""
    fake_cpuinfo(monkeypatch, cpuinfo)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: device == 'cuda')
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', lambda *a, **k: bf16_gpu)
    monkeypatch.setattr(amp_optim_wrapper, 'get_device', lambda: device)
    assert amp_optim_wrapper.amp_dtype_for_device(device) == dtype
    model = torch.nn.Linear(2, 2)
    wrapper = amp_optim_wrapper.AmpOptimWrapper(dtype='auto', optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert wrapper.cast_dtype == dtype
    assert wrapper.loss_scaler.is_enabled() is scaled
    if scaled:  # 'dynamic' (the default): GradScaler's growing scale from 2 ** 16
        assert (wrapper.loss_scaler._init_scale, wrapper.loss_scaler._growth_interval) == (2.0**16, 2000)


def test_auto_dtype_on_cpu_without_bf16_trains_as_fp32(monkeypatch):
    """Where 'auto' resolves to fp32, the step runs without autocast and equals a plain ``OptimWrapper`` step; where it
    resolves to bf16, the forward runs under bf16 autocast."""
    from mmengine.optim import OptimWrapper
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    x = torch.randn(4, 8)
    results = {}
    for name, cpuinfo in (('avx2', AVX2_ONLY), ('avx512', AVX512_BF16)):
        fake_cpuinfo(monkeypatch, cpuinfo)
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 3)
        wrapper = amp_optim_wrapper.AmpOptimWrapper(dtype='auto', optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
        with wrapper.optim_context(model):
            results[name, 'autocast'] = torch.is_autocast_enabled('cpu')
            out = model(x)
        results[name, 'dtype'] = out.dtype
        wrapper.update_params(out.float().square().mean())
        results[name, 'weight'] = model.weight.detach().clone()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3)
    plain = OptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with plain.optim_context(model):
        plain.update_params(model(x).square().mean())
    assert (results['avx2', 'autocast'], results['avx2', 'dtype']) == (False, torch.float32)
    assert torch.equal(results['avx2', 'weight'], model.weight)
    assert (results['avx512', 'autocast'], results['avx512', 'dtype']) == (True, torch.bfloat16)


def test_auto_dtype_names_are_checked():
    with pytest.raises(ValueError, match="'auto' or one of"):
        amp_optim_wrapper.resolve_amp_dtype('fp16', 'cpu')
    assert amp_optim_wrapper.resolve_amp_dtype('float16', 'cuda') == torch.float16
    assert amp_optim_wrapper.resolve_amp_dtype(None, 'cpu') == torch.bfloat16
