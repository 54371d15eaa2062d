"""Where a step's device time goes: torch.profiler's kernels sorted into matmul, attention, elementwise, optimizer
and other, with the attention kernels named (which SDPA backend really ran)."""
from __future__ import annotations

import re

import torch

CATEGORIES = ('matmul', 'attention', 'elementwise', 'optimizer', 'other')
# First match wins: attention before matmul (cutlass fmha kernels), optimizer before elementwise (fused AdamW).
_PATTERNS = (
    ('attention', re.compile(r'fmha|flash|attention|attn|sdpa|triton_tem_fused_flex', re.I)),
    ('optimizer', re.compile(r'adam|multi_tensor|foreach|fused_sgd', re.I)),
    ('matmul', re.compile(r'gemm|nvjet|xmma|cutlass|cublas|sm\d\d_|triton_tem_fused_(mm|addmm|bmm)|splitk|'
                          r'aten::(mm|addmm|bmm|baddbmm|_convolution|mkldnn_convolution|convolution_backward)$', re.I)),
    ('elementwise', re.compile(r'triton_(poi|red|per)_|elementwise|vectorized|reduce|norm|softmax|gelu|copy|fill|'
                               r'cat|index|aten::', re.I)),
)


def category_of(name: str) -> str:
    """The category of one kernel (CUDA) or operator (CPU) name."""
    for category, pattern in _PATTERNS:
        if pattern.search(name):
            return category
    return 'other'


def profile_categories(prof, device_type: str) -> dict:
    """Milliseconds of device time per category in one profiled step, and the attention kernels by time.

    Args:
        prof: a finished ``torch.profiler.profile`` of exactly one step.
        device_type: ``'cuda'`` (kernels' device self time) or ``'cpu'`` (operators' CPU self time).

    Returns:
        ``dict(ms={category: ms}, total=ms, attention_kernels=[(name, ms), ...])``.
    """
    ms = dict.fromkeys(CATEGORIES, 0.0)
    attention: dict[str, float] = {}
    for event in prof.key_averages():
        if device_type == 'cuda':
            if event.device_type != torch.autograd.DeviceType.CUDA:
                continue
            us = getattr(event, 'self_device_time_total', None)
            if us is None:
                us = event.self_cuda_time_total
        else:
            if event.device_type != torch.autograd.DeviceType.CPU or not event.key.startswith('aten::'):
                continue
            us = event.self_cpu_time_total
        if us <= 0:
            continue
        category = category_of(event.key)
        ms[category] += us / 1000
        if category == 'attention':
            attention[event.key] = attention.get(event.key, 0.0) + us / 1000
    names = sorted(attention.items(), key=lambda item: -item[1])
    return dict(ms=ms, total=sum(ms.values()), attention_kernels=names)
