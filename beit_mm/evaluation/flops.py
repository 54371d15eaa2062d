"""FLOPs and parameters of a beit_mm / OpenMMLab model on one image: MMEngine's ``FlopAnalyzer`` (one multiply-add
= 1 FLOP; norms and activations not counted) with handles for ``scaled_dot_product_attention`` and ``baddbmm``.

A segmentor or classifier runs its ``mode='tensor'`` forward on the whole image; a MIM model its training forward
with 40% of the patches masked, the frozen tokenizer's share returned apart.
"""
from __future__ import annotations

import inspect

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.analysis.print_helper import _format_size, complexity_stats_table
from mmengine.config import Config
from torch import Tensor, nn

DEFAULT_SHAPE = (224, 224)
# BEiT's masking: 75 of 14 x 14 patches (unilm run_beit_pretraining.py --num_mask_patches 75), i.e. about 40%.
MIM_MASK_RATIO = 0.4


def model_kind(model: nn.Module) -> str:
    """'mim', 'segmentor' or 'classifier'."""
    if hasattr(model, 'target_generator'):
        return 'mim'
    if hasattr(model, 'decode_head'):
        return 'segmentor'
    if hasattr(model, 'head'):
        return 'classifier'
    raise ValueError(f'{type(model).__name__} is neither a segmentor (decode_head), a classifier (head) nor a MIM '
                     'model (target_generator); beit_mm.evaluation.flops counts only these')


def default_shape(cfg: Config, kind: str) -> tuple[int, int]:
    if kind == 'segmentor':
        size = cfg.model.get('data_preprocessor', {}).get('size')
        if size is not None:
            return tuple(size)
    return DEFAULT_SHAPE


class TensorForward(nn.Module):
    """``model(images, mode='tensor')`` with a plain tensor argument, as the jit tracer needs; a decode head whose
    ``forward`` takes data samples (``Mask2FormerHead``) gets them built from the input's shape."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        head = getattr(model, 'decode_head', None)
        self.head_takes_samples = head is not None and 'batch_data_samples' in inspect.signature(
            head.forward).parameters

    def forward(self, images: Tensor):
        if self.head_takes_samples:
            from mmseg.structures import SegDataSample
            shape = tuple(images.shape[-2:])
            samples = [SegDataSample(metainfo=dict(img_shape=shape, pad_shape=shape, ori_shape=shape))
                       for _ in range(images.shape[0])]
            return self.model.decode_head.forward(self.model.extract_feat(images), samples)
        return self.model(images, mode='tensor')


class MIMForward(nn.Module):
    """The MIM training forward ``model(dict(images, target_images, mask), mode='loss')``; returns its summed
    losses."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: Tensor, target_images: Tensor, mask: Tensor) -> Tensor:
        losses = self.model(dict(images=images, target_images=target_images, mask=mask), mode='loss')
        return sum(v for k, v in losses.items() if k.startswith('loss'))


def mim_inputs(model: nn.Module, h: int, w: int) -> tuple[Tensor, Tensor, Tensor]:
    """(images (1, 3, H, W), tokenizer view (1, 3, h * p, w * p) RGB 0..255, mask (1, h, w)) for the mask grid
    ``h, w = H/16, W/16`` and the tokenizer's pixels per target ``p``."""
    patch = getattr(model.backbone, 'patch_size', 16)  # CvT MIM predicts on its stride-16 stage
    if h % patch or w % patch:
        raise ValueError(f'--shape {h} {w} must be divisible by the {patch} px mask patches')
    gh, gw = h // patch, w // patch
    # tokenizer pixels per target: DALL-E's and the dVAE's ``downsample``, VQ-KD's ``patch_size``
    downsample = getattr(model.target_generator, 'downsample', None) or model.target_generator.patch_size
    mask = torch.zeros(1, gh * gw, dtype=torch.bool)
    mask[:, :max(1, round(MIM_MASK_RATIO * gh * gw))] = True
    images = torch.randn(1, 3, h, w)
    target_images = torch.rand(1, 3, gh * downsample, gw * downsample) * 255
    return images, target_images, mask.view(1, gh, gw)


def sdpa_flop_jit(inputs: list, outputs: list) -> int:
    """FLOPs of ``aten::scaled_dot_product_attention`` (q, k, v, ...): the two matmuls ``q @ k^T`` and ``attn @ v``,
    as the eager path's ``aten::matmul`` count. MMEngine has no handle for it, so SDPA would count as 0."""
    q, k, v = (get_shape(x) for x in inputs[:3])  # (..., Nq, d), (..., Nk, d), (..., Nk, dv)
    batch = 1
    for size in q[:-2]:
        batch *= size
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def baddbmm_flop_jit(inputs: list, outputs: list) -> int:
    """FLOPs of ``aten::baddbmm`` (input, b1, b2): ``B n k m`` of the product (B, n, k) x (B, k, m), as ``bmm``.
    ``nn.MultiheadAttention`` uses it under an attention mask, and MMEngine has no handle for it."""
    b1, b2 = get_shape(inputs[1]), get_shape(inputs[2])
    return b1[0] * b1[1] * b1[2] * b2[2]


def complexity(model: nn.Module, shape: tuple[int, int], show_table: bool = False, warnings: bool = True) -> dict:
    """FLOPs and parameters of ``model``'s forward on one ``shape`` image: ``dict(kind, flops, flops_str, params,
    params_str, tokenizer_flops, out_table)``, ``tokenizer_flops`` the MIM tokenizer's part (0 for other kinds).
    ``warnings=False`` silences MMEngine's lists of uncounted operators and uncalled modules."""
    kind = model_kind(model)
    if getattr(model, 'attn_mask_probs', None) is not None:  # EoMT: inference after mask annealing
        model.attn_mask_probs.zero_()
    if kind == 'mim':
        wrapper, inputs = MIMForward(model), mim_inputs(model, *shape)
    else:
        wrapper, inputs = TensorForward(model), (torch.randn(1, 3, *shape), )
    with torch.no_grad():
        analyzer = FlopAnalyzer(wrapper, inputs).set_op_handle('aten::scaled_dot_product_attention', sdpa_flop_jit,
                                                               'aten::baddbmm', baddbmm_flop_jit)
        analyzer.unsupported_ops_warnings(warnings).uncalled_modules_warnings(warnings)
        flops = analyzer.total()
        tokenizer = analyzer.by_module().get('model.target_generator', 0) if kind == 'mim' else 0
        table = complexity_stats_table(flops=analyzer, max_depth=3) if show_table else ''
    params = parameter_count(model)['']
    return dict(kind=kind, flops=flops, flops_str=_format_size(flops), params=params, params_str=_format_size(params),
                tokenizer_flops=tokenizer, out_table=table)
