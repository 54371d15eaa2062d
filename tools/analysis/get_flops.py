"""FLOPs and parameters of a config's model (segmentor, classifier or masked-image-modeling model).

    python tools/analysis/get_flops.py CONFIG [--shape H W] [--show-table]

Counted with MMEngine's ``FlopAnalyzer`` (fvcore's jit-trace counter, what ``get_model_complexity_info`` and mmseg
1.x's / mmpretrain 1.x's ``get_flops.py`` use; one multiply-add = 1 FLOP; norms and activations are not counted) plus
a handle for ``scaled_dot_product_attention``, on one image of ``H x W`` with random weights (no checkpoint is read:
every ``init_cfg`` of type ``Pretrained`` is dropped). What runs:

- segmentor (mmseg ``BaseSegmentor``): ``model(inputs, mode='tensor')`` = backbone + neck + decode head on the whole
  image (no slide windows); the auxiliary head is training-only and is removed before counting (mmseg 0.x's
  ``get_flops.py`` did the same). Default shape: the config's ``data_preprocessor.size`` (its crop).
  ``beit_mm.EoMT`` counts its inference after mask annealing (every masked block's probability 0: no intermediate
  predictions or masks), ``mode='tensor'`` = the backbone with the queries in its last blocks, the mask module and the
  class head; its training forward with masks on costs more (one extra prediction per masked block). Mask2Former
  (mmseg's ``Mask2FormerHead``, whose ``forward`` needs the data samples): backbone + neck + the head's ``forward``
  (pixel decoder, every decoder layer's class and mask predictions, as its inference computes them); the
  deformable attention's sampling (``grid_sample``) is not counted, its projections are.
- classifier (mmpretrain ``ImageClassifier``): ``model(inputs, mode='tensor')`` = backbone + neck + head logits.
  Default shape 224 x 224.
- MIM model (one with a ``target_generator``): the training forward ``model(inputs, mode='loss')``: the tokenizer on
  the ``H/2 x W/2`` view (DALL-E's 112 px for 224 px images), the backbone with a mask of the first
  ``round(0.4 * h * w)`` patches (BEiT's 75 of 196) and the MIM head at those positions. Default shape 224 x 224.

Prints ``Flops: <x>G`` and ``Params: <y>M`` (mmengine's ``flops_str``/``params_str``, 3 significant digits) plus the
exact counts; ``--show-table`` adds the per-module table.
"""
from __future__ import annotations

import argparse
import inspect

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.analysis.print_helper import _format_size, complexity_stats_table
from mmengine.config import Config, DictAction
from torch import Tensor, nn

import beit_mm  # noqa: F401  (registrations)
from beit_mm.apis import build_from_config

DEFAULT_SHAPE = (224, 224)
# BEiT's masking: 75 of 14 x 14 patches (unilm run_beit_pretraining.py --num_mask_patches 75), i.e. about 40%.
MIM_MASK_RATIO = 0.4


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='FLOPs and parameters of a beit_mm config')
    parser.add_argument('config', help='config file')
    parser.add_argument('--shape', type=int, nargs='+', metavar=('H', 'W'),
                        help='input size (one value for square); default: the crop of a segmentation config, else '
                        '224 x 224')
    parser.add_argument('--show-table', action='store_true', help='print the per-module table')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config keys, k=v ...')
    return parser.parse_args()


def model_kind(model: nn.Module) -> str:
    """'mim', 'segmentor' or 'classifier'."""
    if hasattr(model, 'target_generator'):
        return 'mim'
    if hasattr(model, 'decode_head'):
        return 'segmentor'
    if hasattr(model, 'head'):
        return 'classifier'
    raise ValueError(f'{type(model).__name__} is neither a segmentor (decode_head), a classifier (head) nor a MIM '
                     'model (target_generator); get_flops.py counts only these')


def default_shape(cfg: Config, kind: str) -> tuple[int, int]:
    if kind == 'segmentor':
        size = cfg.model.get('data_preprocessor', {}).get('size')
        if size is not None:
            return tuple(size)
    return DEFAULT_SHAPE


class TensorForward(nn.Module):
    """``model(images, mode='tensor')`` with a plain tensor argument (what the jit tracer needs). A decode head whose
    ``forward`` also takes the images' data samples (mmseg's ``Mask2FormerHead``, i.e. mmdet's) gets them built from
    the input's shape: ``decode_head.forward(extract_feat(images), samples)``, its class and mask predictions of
    every decoder layer, which its inference computes."""

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
    """The MIM training forward ``model(dict(images, target_images, mask), mode='loss')``; returns the loss."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: Tensor, target_images: Tensor, mask: Tensor) -> Tensor:
        return self.model(dict(images=images, target_images=target_images, mask=mask), mode='loss')['loss']


def mim_inputs(model: nn.Module, h: int, w: int) -> tuple[Tensor, Tensor, Tensor]:
    """(images (1, 3, H, W), tokenizer view (1, 3, H/2, W/2) in [0.1, 0.9], mask (1, H/16, W/16))."""
    patch = getattr(model.backbone, 'patch_size', 16)  # CvT MIM predicts on its stride-16 stage
    if h % patch or w % patch:
        raise ValueError(f'--shape {h} {w} must be divisible by the {patch} px mask patches')
    gh, gw = h // patch, w // patch
    downsample = model.target_generator.downsample
    mask = torch.zeros(1, gh * gw, dtype=torch.bool)
    mask[:, :max(1, round(MIM_MASK_RATIO * gh * gw))] = True
    images = torch.randn(1, 3, h, w)
    target_images = torch.rand(1, 3, gh * downsample, gw * downsample) * 0.8 + 0.1
    return images, target_images, mask.view(1, gh, gw)


def sdpa_flop_jit(inputs: list, outputs: list) -> int:
    """FLOPs of ``aten::scaled_dot_product_attention`` (q, k, v, ...): the two matmuls ``q @ k^T`` and
    ``attn @ v``, counted like MMEngine's ``matmul_flop_jit`` (one multiply-add = 1). MMEngine has no handle for it, so
    without this the attention products of the SDPA path (the default) would count as 0; the eager path's two
    ``aten::matmul`` give the same number (tests/test_flops.py)."""
    q, k, v = (get_shape(x) for x in inputs[:3])  # (..., Nq, d), (..., Nk, d), (..., Nk, dv)
    batch = 1
    for size in q[:-2]:
        batch *= size
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def baddbmm_flop_jit(inputs: list, outputs: list) -> int:
    """FLOPs of ``aten::baddbmm`` (input, b1, b2): the batched product ``b1 @ b2`` (B, n, k) x (B, k, m) -> B n k m,
    as ``bmm``; the addition is not counted. ``nn.MultiheadAttention`` computes ``q @ k^T`` with it when given an
    attention mask (Mask2Former's masked cross-attention), which MMEngine has no handle for."""
    b1, b2 = get_shape(inputs[1]), get_shape(inputs[2])
    return b1[0] * b1[1] * b1[2] * b2[2]


def complexity(model: nn.Module, shape: tuple[int, int], show_table: bool = False) -> dict:
    """FLOPs (MMEngine's ``FlopAnalyzer`` plus :func:`sdpa_flop_jit`) and parameters of the forward described in the
    module docstring, on one ``shape`` image."""
    kind = model_kind(model)
    if getattr(model, 'attn_mask_probs', None) is not None:  # beit_mm.EoMT: inference after mask annealing
        model.attn_mask_probs.zero_()
    if kind == 'mim':
        wrapper, inputs = MIMForward(model), mim_inputs(model, *shape)
    else:
        wrapper, inputs = TensorForward(model), (torch.randn(1, 3, *shape), )
    with torch.no_grad():
        analyzer = FlopAnalyzer(wrapper, inputs).set_op_handle('aten::scaled_dot_product_attention', sdpa_flop_jit,
                                                               'aten::baddbmm', baddbmm_flop_jit)
        flops = analyzer.total()
        table = complexity_stats_table(flops=analyzer, max_depth=3) if show_table else ''
    params = parameter_count(model)['']
    return dict(kind=kind, flops=flops, flops_str=_format_size(flops), params=params, params_str=_format_size(params),
                out_table=table)


def main() -> None:
    args = parse_args()
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    model = build_from_config(cfg, drop_auxiliary_head=True)  # the auxiliary head is training-only
    kind = model_kind(model)
    if args.shape is None:
        shape = default_shape(cfg, kind)
    elif len(args.shape) == 1:
        shape = (args.shape[0], args.shape[0])
    elif len(args.shape) == 2:
        shape = tuple(args.shape)
    else:
        raise ValueError(f'--shape takes H W or one side, got {args.shape}')
    result = complexity(model, shape, args.show_table)
    split = '=' * 30
    if args.show_table:
        print(result['out_table'])
    print(f'{split}\nModel: {kind} ({type(model).__name__})\nInput shape: {shape}\n'
          f'Flops: {result["flops_str"]}\nParams: {result["params_str"]}\n'
          f'Flops (exact): {result["flops"]}\nParams (exact): {result["params"]}\n{split}')


if __name__ == '__main__':
    main()
