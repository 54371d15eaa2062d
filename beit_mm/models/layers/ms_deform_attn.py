"""Multi-scale deformable attention (Zhu et al. ICLR 2021, eq. 3) with a kernel for every device.

:class:`PortableMSDeformAttn` is mmcv 2.1.0's ``MultiScaleDeformableAttention`` (a subclass: the same constructor,
parameters ``sampling_offsets``, ``attention_weights``, ``value_proj``, ``output_proj`` and init) whose sampling kernel
is chosen by what the installed mmcv runs: mmcv's compiled ``ms_deform_attn`` where a probe on a tiny input of that
device type and dtype succeeds, else mmcv's ``multi_scale_deformable_attn_pytorch`` (``F.grid_sample``, with autograd),
which is also the path under ``torch.compile``. :class:`PortableMSDeformAttnPixelDecoder` is mmdet 3.3.0's
``MSDeformAttnPixelDecoder`` whose encoder layers use it.

Conventions: value (B, N_v, C) with N_v = sum(h_l * w_l) of ``spatial_shapes`` (L, 2) rows (h, w); reference points
(B, N_q, L, 2) as (x, y) in [0, 1] (or (B, N_q, L, 4) boxes (cx, cy, w, h)); ``level_start_index`` (L,).

Why: mmcv routes every CUDA tensor to its compiled kernel, which a build without CUDA ops does not have, and has no
CPU kernel at all, so the choice follows the installed build rather than the tensor's device.
"""
from __future__ import annotations

import torch
from mmcv.ops import MultiScaleDeformableAttention
from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction, multi_scale_deformable_attn_pytorch
from mmdet.models.layers import MSDeformAttnPixelDecoder
from torch import Tensor

from ...registry import MODELS

#: (device type, dtype) -> whether mmcv's compiled kernel ran forward and backward on a tiny input there.
_COMPILED_RUNS: dict[tuple[str, torch.dtype], bool] = {}


def _probe_compiled(device: torch.device, dtype: torch.dtype) -> bool:
    """Run mmcv's compiled kernel forward and backward on one sample of one query on ``device``; False if it raises."""
    value = torch.ones(1, 1, 1, 1, device=device, dtype=dtype, requires_grad=True)
    shapes = torch.ones(1, 2, dtype=torch.long, device=device)
    start = torch.zeros(1, dtype=torch.long, device=device)
    locations = torch.full((1, 1, 1, 1, 1, 2), 0.5, device=device, dtype=dtype)
    weights = torch.ones(1, 1, 1, 1, 1, device=device, dtype=dtype)
    try:
        out = MultiScaleDeformableAttnFunction.apply(value, shapes, start, locations, weights, 1)
        out.sum().backward()
    except (RuntimeError, NotImplementedError):
        return False
    return True


def compiled_kernel_runs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether mmcv's compiled ``ms_deform_attn`` runs on ``device``'s type in ``dtype``, probed once per pair.

    Args:
        device: the tensors' device; only its type is probed (``cuda:1`` shares the answer of ``cuda:0``).
        dtype: the value's dtype.

    Returns:
        True when mmcv's compiled forward and backward ran on a tiny input of that device type and dtype.
    """
    key = (device.type, dtype)
    if key not in _COMPILED_RUNS:
        _COMPILED_RUNS[key] = _probe_compiled(device, dtype)
    return _COMPILED_RUNS[key]


def ms_deform_attn(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor, sampling_locations: Tensor,
                   attention_weights: Tensor, im2col_step: int = 64) -> Tensor:
    """Sample and weight multi-scale values with the kernel the installed mmcv runs on ``value``'s device.

    Args:
        value: (B, N_v, heads, C/heads).
        spatial_shapes: (L, 2) long, rows (h, w).
        level_start_index: (L,) long, offsets of the levels in N_v.
        sampling_locations: (B, N_q, heads, L, P, 2) as (x, y) in [0, 1].
        attention_weights: (B, N_q, heads, L, P), summing to 1 over (L, P).
        im2col_step: the compiled kernel's batch chunk.

    Returns:
        (B, N_q, C).
    """
    if not torch.compiler.is_compiling() and compiled_kernel_runs(value.device, value.dtype):
        return MultiScaleDeformableAttnFunction.apply(value, spatial_shapes, level_start_index, sampling_locations,
                                                      attention_weights, im2col_step)
    return multi_scale_deformable_attn_pytorch(value, spatial_shapes, sampling_locations, attention_weights)


@MODELS.register_module()
class PortableMSDeformAttn(MultiScaleDeformableAttention):
    """mmcv's ``MultiScaleDeformableAttention`` whose kernel is :func:`ms_deform_attn`'s choice.

    Takes mmcv's constructor arguments and ``forward`` arguments unchanged; ``key`` and ``**kwargs`` are ignored as
    mmcv ignores them. Returns (N_q, B, C), or (B, N_q, C) with ``batch_first``: ``identity + dropout(out)``.
    """

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                identity: Tensor | None = None, query_pos: Tensor | None = None,
                key_padding_mask: Tensor | None = None, reference_points: Tensor | None = None,
                spatial_shapes: Tensor | None = None, level_start_index: Tensor | None = None,
                **kwargs) -> Tensor:
        value = query if value is None else value
        identity = query if identity is None else identity
        if query_pos is not None:
            query = query + query_pos
        if not self.batch_first:
            query, value = query.transpose(0, 1), value.transpose(0, 1)
        b, n_q, _ = query.shape
        n_v = value.shape[1]
        heads, levels, points = self.num_heads, self.num_levels, self.num_points

        value = self.value_proj(value)
        if key_padding_mask is not None:
            value = value.masked_fill(key_padding_mask[..., None], 0.0)
        value = value.view(b, n_v, heads, -1)
        offsets = self.sampling_offsets(query).view(b, n_q, heads, levels, points, 2)
        weights = self.attention_weights(query).view(b, n_q, heads, levels * points).softmax(-1)
        weights = weights.view(b, n_q, heads, levels, points)
        ref = reference_points[:, :, None, :, None]
        if reference_points.shape[-1] == 2:
            wh = spatial_shapes.flip(-1)[None, None, None, :, None]
            locations = ref + offsets / wh
        elif reference_points.shape[-1] == 4:
            locations = ref[..., :2] + offsets / points * ref[..., 2:] * 0.5
        else:
            raise ValueError(f'reference_points end in {reference_points.shape[-1]} values; pass (x, y) points '
                             '(last dim 2) or (cx, cy, w, h) boxes (last dim 4)')
        out = self.output_proj(ms_deform_attn(value, spatial_shapes, level_start_index, locations, weights,
                                              self.im2col_step))
        if not self.batch_first:
            out = out.transpose(0, 1)
        return self.dropout(out) + identity


@MODELS.register_module()
class PortableMSDeformAttnPixelDecoder(MSDeformAttnPixelDecoder):
    """mmdet's ``MSDeformAttnPixelDecoder`` (same arguments, weights and init) with :class:`PortableMSDeformAttn`
    in its encoder layers.

    Why: mmdet's encoder layer builds mmcv's class by name, so the attentions are swapped after mmdet builds them,
    keeping their weights and leaving the random stream as mmdet left it.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for layer in self.encoder.layers:
            layer.self_attn = as_portable(layer.self_attn, layer.self_attn_cfg)


def as_portable(attn: MultiScaleDeformableAttention, cfg: dict) -> PortableMSDeformAttn:
    """A :class:`PortableMSDeformAttn` built from ``cfg`` holding ``attn``'s weights, drawing no random numbers."""
    with torch.random.fork_rng(devices=[]):
        portable = PortableMSDeformAttn(**cfg)
    portable.load_state_dict(attn.state_dict())
    return portable.to(next(attn.parameters()).device)
