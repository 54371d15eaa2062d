"""Model FLOPs utilization (MFU): achieved model FLOP/s over the device's dense peak for the dtype the matmuls run in.

Rule (PaLM, arXiv 2204.02311 appendix B):

- FLOPs per image: the counter (:func:`beit_mm.evaluation.flops.complexity`) counts a multiply-add as 1, MFU as 2. A
  train step is 3 x the forward, a frozen part (a MIM tokenizer) forward only: ``2 * (3 * (fwd - frozen) + frozen)``;
  inference ``2 * fwd``. Recomputation, masking savings and the optimizer are not counted.
- achieved TFLOP/s = FLOPs per image x images/s / 1e12; MFU = achieved / peak.
- Peak: the dense tensor-core number of the matmul dtype: ``bf16``/``fp16`` under autocast; for fp32 ``tf32`` at
  ``torch.get_float32_matmul_precision()`` ``'high'``/``'medium'``, else ``fp32`` (cuDNN convolutions use TF32 by
  default, so a conv-heavy fp32 row can overstate its MFU). CPUs have no entry: TFLOP/s without MFU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

# Dense peaks in TFLOP/s per GPU: NVIDIA's datasheets give tensor-core numbers "with sparsity"; the dense number is
# half of it. (regex on torch.cuda.get_device_name, name, {kind: TFLOP/s}, source). First match wins, so the specific
# variants (PCIe, NVL) come before the SXM default of a name.
_PEAKS: tuple[tuple[str, str, dict[str, float], str], ...] = (
    (r'\bH100\b.*\bPCIe\b', 'H100 PCIe', dict(bf16=756.0, fp16=756.0, tf32=378.0, fp32=51.0),
     'NVIDIA H100 Tensor Core GPU datasheet (PCIe column: BF16 1,513 / TF32 756 with sparsity, FP32 51)'),
    (r'\bH100\b.*\bNVL\b', 'H100 NVL', dict(bf16=835.0, fp16=835.0, tf32=418.0, fp32=60.0),
     'NVIDIA H100 Tensor Core GPU datasheet (NVL column: BF16 1,671 / TF32 835 with sparsity, FP32 60)'),
    (r'\bH200\b.*\bNVL\b', 'H200 NVL', dict(bf16=835.0, fp16=835.0, tf32=418.0, fp32=60.0),
     'NVIDIA H200 Tensor Core GPU datasheet (NVL column: BF16 1,671 / TF32 835 with sparsity, FP32 60)'),
    (r'\bG?H100\b', 'H100 SXM', dict(bf16=989.0, fp16=989.0, tf32=495.0, fp32=67.0),
     'NVIDIA H100 Tensor Core GPU datasheet (SXM column: BF16 1,979 / TF32 989 with sparsity, FP32 67)'),
    (r'\bG?H200\b', 'H200 SXM', dict(bf16=989.0, fp16=989.0, tf32=495.0, fp32=67.0),
     'NVIDIA H200 Tensor Core GPU datasheet (SXM column: BF16 1,979 / TF32 989 with sparsity, FP32 67)'),
    (r'\bA100\b', 'A100', dict(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
     'NVIDIA A100 Tensor Core GPU datasheet (BF16 312 / TF32 156 dense, FP32 19.5; SXM and PCIe alike)'),
    (r'\bL40S\b', 'L40S', dict(bf16=362.0, fp16=362.0, tf32=183.0, fp32=91.6),
     'NVIDIA L40S datasheet (BF16 733 / TF32 366 with sparsity, FP32 91.6)'),
    (r'\bL4\b', 'L4', dict(bf16=121.0, fp16=121.0, tf32=60.0, fp32=30.3),
     'NVIDIA L4 datasheet (BF16 242 / TF32 120 with sparsity, FP32 30.3)'),
    (r'\bA10\b', 'A10', dict(bf16=125.0, fp16=125.0, tf32=62.5, fp32=31.2),
     'NVIDIA A10 datasheet (BF16 250 / TF32 125 with sparsity, FP32 31.2)'),
    (r'\bV100\b', 'V100 SXM2', dict(fp16=125.0, fp32=15.7),
     'NVIDIA V100 datasheet (SXM2: FP16 tensor 125, FP32 15.7; no bf16 or tf32; PCIe is 112 / 14)'),
    (r'\bRTX 3090\b', 'RTX 3090', dict(bf16=71.0, fp16=71.0, tf32=35.6, fp32=35.6),
     'NVIDIA Ampere GA102 whitepaper (RTX 3090: FP16/BF16 tensor with FP32 accumulate 71 dense, TF32 35.6, FP32 35.6)'),
)


@dataclass(frozen=True)
class Peak:
    """A device's dense peak for one kind of arithmetic: ``tflops`` TFLOP/s of ``kind`` ('bf16', 'fp16', 'tf32',
    'fp32') on ``device`` (the table's name), from ``source``."""
    device: str
    kind: str
    tflops: float
    source: str


def peak_kind(dtype: torch.dtype | None, fp32_matmul_precision: str = 'highest') -> str:
    """The arithmetic a step's matmuls run in: the autocast ``dtype`` (None = fp32), with fp32 matmuls on TF32 tensor
    cores unless ``fp32_matmul_precision`` is ``'highest'`` (``torch.get_float32_matmul_precision()``)."""
    if dtype is None or dtype == torch.float32:
        return 'fp32' if fp32_matmul_precision == 'highest' else 'tf32'
    kinds = {torch.bfloat16: 'bf16', torch.float16: 'fp16'}
    if dtype not in kinds:
        raise ValueError(f'no peak kind for {dtype}; use torch.bfloat16, torch.float16 or None (fp32)')
    return kinds[dtype]


def device_peak(device_name: str, kind: str) -> Peak | None:
    """The dense peak of ``kind`` for the GPU named ``device_name`` (``torch.cuda.get_device_name()``, e.g.
    ``'NVIDIA H100 80GB HBM3'``), or None for a device not in the table or without that kind (a CPU, V100 bf16)."""
    for pattern, name, peaks, source in _PEAKS:
        if re.search(pattern, device_name, re.I):
            return Peak(name, kind, peaks[kind], source) if kind in peaks else None
    return None


def step_flops_per_image(forward_macs: float, train: bool, frozen_macs: float = 0.0) -> float:
    """Model FLOPs of one image's step from the counter's multiply-adds of the forward (``forward_macs``, the frozen
    part's ``frozen_macs`` included in it): ``2 * (3 * (fwd - frozen) + frozen)`` for a train step, ``2 * fwd`` for
    inference."""
    if not 0 <= frozen_macs <= forward_macs:
        raise ValueError(f'frozen_macs {frozen_macs} must lie in [0, forward_macs = {forward_macs}]')
    if not train:
        return 2.0 * forward_macs
    return 2.0 * (3.0 * (forward_macs - frozen_macs) + frozen_macs)


def achieved_tflops(flops_per_image: float, images_per_second: float) -> float:
    """TFLOP/s of the model's arithmetic at ``images_per_second``."""
    return flops_per_image * images_per_second / 1e12


def mfu(tflops: float, peak: Peak | None) -> float | None:
    """Model FLOPs utilization as a fraction of ``peak`` (None without a peak: CPUs, unknown GPUs)."""
    return None if peak is None else tflops / peak.tflops
