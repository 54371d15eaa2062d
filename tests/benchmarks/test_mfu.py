"""``beit_mm.benchmarks.mfu``: the peak table by device name and the MFU arithmetic, on known numbers."""
import pytest
import torch

from beit_mm.benchmarks.mfu import achieved_tflops, device_peak, mfu, peak_kind, step_flops_per_image


@pytest.mark.parametrize('name,kind,device,tflops', [
    ('NVIDIA H100 80GB HBM3', 'bf16', 'H100 SXM', 989.0),
    ('NVIDIA H100 PCIe', 'bf16', 'H100 PCIe', 756.0),
    ('NVIDIA H100 NVL', 'bf16', 'H100 NVL', 835.0),
    ('NVIDIA H200', 'bf16', 'H200 SXM', 989.0),
    ('NVIDIA H200', 'fp32', 'H200 SXM', 67.0),
    ('NVIDIA H200', 'tf32', 'H200 SXM', 495.0),
    ('NVIDIA A100-SXM4-80GB', 'bf16', 'A100', 312.0),
    ('NVIDIA A100 80GB PCIe', 'tf32', 'A100', 156.0),
    ('NVIDIA A10', 'bf16', 'A10', 125.0),       # not the A100
    ('NVIDIA L40S', 'bf16', 'L40S', 362.0),
    ('NVIDIA L4', 'bf16', 'L4', 121.0),         # not the L40S
    ('NVIDIA GeForce RTX 3090', 'bf16', 'RTX 3090', 71.0),
])
def test_device_peak_by_name(name, kind, device, tflops):
    peak = device_peak(name, kind)
    assert (peak.device, peak.kind, peak.tflops) == (device, kind, tflops) and peak.source


def test_no_peak_for_cpus_unknown_gpus_and_missing_kinds():
    assert device_peak('AMD EPYC', 'bf16') is None
    assert device_peak('NVIDIA Some Future GPU', 'bf16') is None
    assert device_peak('Tesla V100-SXM2-16GB', 'bf16') is None  # no bf16 on Volta
    assert device_peak('Tesla V100-SXM2-16GB', 'fp16').tflops == 125.0
    assert mfu(1.0, None) is None


def test_peak_kind_follows_autocast_and_the_fp32_matmul_precision():
    assert peak_kind(torch.bfloat16) == 'bf16' and peak_kind(torch.float16) == 'fp16'
    assert peak_kind(None) == 'fp32' == peak_kind(torch.float32, 'highest')  # PyTorch's default: no TF32 matmuls
    assert peak_kind(None, 'high') == 'tf32' == peak_kind(None, 'medium')
    with pytest.raises(ValueError, match='no peak kind'):
        peak_kind(torch.float64)


def test_step_flops_count_two_per_multiply_add_three_forwards_to_train_and_frozen_parts_once():
    assert step_flops_per_image(10e9, train=False) == 20e9
    assert step_flops_per_image(10e9, train=True) == 60e9
    # a MIM step: 10 G multiply-adds of which 4 G are the frozen tokenizer's (forward only)
    assert step_flops_per_image(10e9, train=True, frozen_macs=4e9) == 2 * (3 * 6e9 + 4e9)
    with pytest.raises(ValueError, match='frozen_macs'):
        step_flops_per_image(1e9, train=True, frozen_macs=2e9)


def test_known_mfu_timm_beit_base_on_an_rtx_3090():
    """timm's BEiT-B/16 224 train step: 358 img/s at batch 192 on an RTX 3090, about 53% of its peak
    (/work/shared/REFERENCE.md section 7); BEiT-B's forward is 17.58 G multiply-adds (mmpretrain's configs/beit)."""
    flops = step_flops_per_image(17.58e9, train=True)
    tflops = achieved_tflops(flops, 358.0)
    assert tflops == pytest.approx(37.76, abs=0.01)
    assert mfu(tflops, device_peak('NVIDIA GeForce RTX 3090', 'bf16')) == pytest.approx(0.532, abs=0.001)


def test_known_mfu_of_the_measured_h200_matmul():
    """An 8192^3 bf16 matmul (2 * 8192^3 FLOPs) at about 790 TFLOP/s on an H200 is 80% of the 989 dense peak."""
    seconds = 2 * 8192**3 / 790e12
    tflops = 2 * 8192**3 / seconds / 1e12
    assert mfu(tflops, device_peak('NVIDIA H200', peak_kind(torch.bfloat16))) == pytest.approx(0.799, abs=0.001)
