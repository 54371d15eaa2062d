"""Export a beit_mm model to ONNX at a fixed input size (mmdeploy's place for mmseg/mmpretrain models).

What is exported (:func:`export_module`), input ``input`` (B, 3, H, W) float32, already normalized the way the config's
``data_preprocessor`` does it (mean/std, RGB order; both are written into the file's metadata), all sizes static:

- ``'segmentor'`` (mmseg ``EncoderDecoder``): ``logits`` (B, K, H, W), the decode head's class scores resized to the
  input size (bilinear, the head's ``align_corners``): what mmseg's ``encode_decode`` returns for one whole-image
  forward at the crop size. ``beit_mm.EoMT`` exports whole the same way (its ``encode_decode``: per-pixel sum over
  queries of class probability x mask probability); it has no decoder to leave out. Slide windows, flips and scales
  stay in Python around the exported model (``tools/infer.py --onnx``), as they are loops over this call.
- ``'classifier'`` (mmpretrain ``ImageClassifier``): ``logits`` (B, num_classes), before softmax.
- ``'backbone'`` (any config's ``model.backbone``): ``feat0``, ``feat1``, ... the backbone's output maps.

The relative position bias is resolved for the exported grid before tracing (:func:`fix_input_grid`): every table
(per block and shared) and the absolute position embedding are resampled once in PyTorch to ``(H/p, W/p)``, so the
graph holds no resampling, only a gather of each block's table with a constant index. The export does not fold
constants: folded, the biases would be stored as (heads, N, N) floats per block (605 MB for BEiT-B at 512, 1.5 GB at
640, past ONNX's 2 GB protobuf limit together with the weights) instead of tables of a few thousand rows;
onnxruntime folds them once when it loads the model. Adaptive average pooling (UPerNet's pyramid pooling) becomes two products with constant
averaging matrices (:class:`MatrixAdaptiveAvgPool2d`), which ONNX can express at any size.
"""
from __future__ import annotations

import copy
import json
import os.path as osp
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmpretrain.models.classifiers import ImageClassifier
from torch import Tensor, nn

from ..models.backbones.beit import BEiT
from ..models.layers.attention import BEiTAttention
from ..models.layers.pos_embed import resize_pos_embed
from ..models.layers.rel_pos_bias import resize_rel_pos_bias_table
from ..fileio.inputs import read_input
from ..models.builder import is_segmentor_config, model_class

KINDS = ('segmentor', 'classifier', 'backbone')
OPSET = 17  # LayerNormalization is an ONNX op from opset 17
INPUT_NAME = 'input'
#: The ``metadata_props`` keys an export writes and :mod:`beit_mm.apis.onnx_inference` reads: the model kind (one of
#: :data:`KINDS`), the input shape ``[batch, 3, H, W]`` (JSON), the class names and palette (JSON, segmentors).
KIND_KEY = 'beit_mm.kind'
SHAPE_KEY = 'beit_mm.shape'
DATASET_META_KEY = 'dataset_meta'


class ExportError(ValueError):
    """A model that cannot be exported as asked; the message names the fix."""


#: Bounds of the metadata an export writes from a checkpoint's ``meta.dataset_meta`` (class names, palette): a
#: checkpoint's records can share one object many times (pickle memo), so a small file can declare a list of a
#: million long names; its size is checked element by element before anything is joined or written.
MAX_CLASSES = 65536
MAX_CLASS_NAME_CHARS = 256
MAX_METADATA_BYTES = 2**20  # all metadata_props of one exported file together


def dataset_meta_json(meta, source: str) -> str | None:
    """The JSON text of a checkpoint's ``dataset_meta`` (``{"classes": [...], "palette": [[r, g, b], ...] | null}``)
    as plain, bounded values, or None when it has no ``classes``.

    Raises:
        ExportError: classes that are not strings, more than :data:`MAX_CLASSES`, a name over
            :data:`MAX_CLASS_NAME_CHARS`, a palette entry that is not three integers 0..255, more palette entries than
            classes, or JSON over :data:`MAX_METADATA_BYTES`; the message names ``source`` and the bound.
    """
    if not isinstance(meta, dict) or 'classes' not in meta:
        return None
    classes, palette = meta['classes'], meta.get('palette') or []

    def refuse(problem: str) -> ExportError:
        return ExportError(f'{source}: meta.dataset_meta {problem}: not written into the exported file. Fix: export '
                           'from a checkpoint whose dataset_meta lists the classes (and palette) of its dataset')

    if not isinstance(classes, (list, tuple)) or len(classes) > MAX_CLASSES:
        raise refuse(f'classes are not a list of at most {MAX_CLASSES} names')
    if not all(type(c) is str and len(c) <= MAX_CLASS_NAME_CHARS for c in classes):
        raise refuse(f'classes hold something other than names of at most {MAX_CLASS_NAME_CHARS} characters')
    if not isinstance(palette, (list, tuple)) or len(palette) > len(classes) or not all(
            isinstance(c, (list, tuple)) and len(c) == 3 and all(type(v) is int and 0 <= v <= 255 for v in c)
            for c in palette):
        raise refuse('palette is not one [r, g, b] of integers 0..255 per class')
    size = sum(len(c.encode('utf-8', 'replace')) + 4 for c in classes) + 16 * len(palette)
    if size > MAX_METADATA_BYTES:
        raise refuse(f'takes about {size} bytes, more than the {MAX_METADATA_BYTES} an export writes')
    return json.dumps({'classes': list(classes), 'palette': [list(c) for c in palette] or None})


def model_kind(cfg: Config) -> str:
    """'segmentor' (an mmseg segmentor: ``EncoderDecoder``, ``beit_mm.EoMT``), 'classifier' (mmpretrain
    ``ImageClassifier``) or 'backbone' (anything else, e.g. a MIM pretraining model, of which only the backbone is
    exported); a subclass counts as its base class (:func:`beit_mm.models.builder.model_class`)."""
    if is_segmentor_config(cfg):
        return 'segmentor'
    if issubclass(model_class(cfg), ImageClassifier):
        return 'classifier'
    return 'backbone'


def fix_input_grid(model: nn.Module, shape: tuple[int, int]) -> None:
    """Resample, in place, every BEiT's position tables of ``model`` for ``shape`` (H, W) inputs.

    Each per-block and shared relative position bias table and the absolute position embedding are resampled from
    the grid the model was built for to ``(H/p, W/p)`` (``resize_rel_pos_bias_table``: unilm's geometric cubic method
    when growing, the exact central block when shrinking) and the model's grid is set to it, so its forward at that
    size resamples nothing. The function computed at ``shape`` is unchanged (the forward resamples the same way).
    """
    for module in model.modules():
        if not isinstance(module, BEiT):
            continue
        h, w = shape
        p = module.patch_size
        if h % p or w % p:
            raise ExportError(f'--shape {h} {w} is not divisible by the BEiT patch size {p}')
        grid = (h // p, w // p)
        with torch.no_grad():
            if module.pos_embed is not None:
                module.pos_embed = nn.Parameter(resize_pos_embed(module.pos_embed, module.grid, grid,
                                                                 num_extra_tokens=0 if module.no_embed_class else 1))
            if module.rel_pos_bias is not None:
                shared = module.rel_pos_bias
                shared.relative_position_bias_table = nn.Parameter(
                    resize_rel_pos_bias_table(shared.relative_position_bias_table, shared.grid, grid))
                shared.grid = grid
            for attn in module.modules():
                if isinstance(attn, BEiTAttention):
                    attn.attn_impl = 'eager'  # the same function as SDPA; a plain MatMul-Add-Softmax-MatMul graph
                if isinstance(attn, BEiTAttention) and attn.relative_position_bias_table is not None:
                    attn.relative_position_bias_table = nn.Parameter(
                        resize_rel_pos_bias_table(attn.relative_position_bias_table, attn.grid, grid))
                    attn.grid = grid
        module.grid = grid


def pool_matrix(size: int, out: int) -> Tensor:
    """(out, size) matrix whose row i averages the input cells of adaptive average pooling's window i:
    ``[floor(i * size / out), ceil((i + 1) * size / out))`` (PyTorch's ``adaptive_avg_pool2d`` windows)."""
    rows = []
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    return torch.tensor(rows)  # built from Python values: a constant when traced


class MatrixAdaptiveAvgPool2d(nn.Module):
    """``nn.AdaptiveAvgPool2d`` as ``P_h @ x @ P_w^T`` with constant window-averaging matrices (:func:`pool_matrix`).

    ONNX's exporter handles adaptive pooling only when the output size divides the input size; UPerNet's pyramid
    pooling (scales 1, 2, 3, 6) on a 16x16 map (512 px at stride 32) does not. At a fixed input size the matrices
    are constants, and the result equals adaptive average pooling up to float summation order.
    """

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)

    def forward(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, C, out_h, out_w)."""
        h, w = int(x.shape[-2]), int(x.shape[-1])
        out_h, out_w = (o if o is not None else n for o, n in zip(self.output_size, (h, w)))
        ph = pool_matrix(h, out_h).to(x)
        pw = pool_matrix(w, out_w).to(x)
        return ph @ x @ pw.transpose(0, 1)


def replace_adaptive_pooling(model: nn.Module) -> None:
    """Swap every ``nn.AdaptiveAvgPool2d`` of ``model`` for :class:`MatrixAdaptiveAvgPool2d`, in place."""
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.AdaptiveAvgPool2d):
            parent_name, _, child = name.rpartition('.')
            setattr(model.get_submodule(parent_name), child, MatrixAdaptiveAvgPool2d(module.output_size))


class SegmentorLogits(nn.Module):
    """mmseg ``EncoderDecoder`` -> (B, K, H, W) class scores at the input size (``encode_decode`` of one window)."""

    def __init__(self, segmentor: nn.Module) -> None:
        super().__init__()
        self.segmentor = segmentor

    def forward(self, x: Tensor) -> Tensor:
        if getattr(self.segmentor, 'decode_head', None) is None:  # beit_mm.EoMT
            return self.segmentor.encode_decode(x, None)
        head = self.segmentor.decode_head
        logits = head.forward(self.segmentor.extract_feat(x))
        return F.interpolate(logits, size=x.shape[2:], mode='bilinear', align_corners=head.align_corners)


class ClassifierLogits(nn.Module):
    """mmpretrain ``ImageClassifier`` -> (B, num_classes) scores before softmax."""

    def __init__(self, classifier: nn.Module) -> None:
        super().__init__()
        self.classifier = classifier

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier.head(self.classifier.extract_feat(x))


class BackboneMaps(nn.Module):
    """A backbone -> its tuple of output maps."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return tuple(self.backbone(x))


def export_module(model: nn.Module, kind: str, shape: tuple[int, int]) -> nn.Module:
    """A copy of ``model`` (eval mode, position tables fixed for ``shape``, adaptive pooling as constant matrices)
    wrapped to return plain tensors."""
    if kind not in KINDS:
        raise ValueError(f'unknown export kind {kind!r}; choose one of {KINDS}')
    model = copy.deepcopy(model).eval()
    check_deterministic(model)
    fix_input_grid(model, shape)
    replace_adaptive_pooling(model)
    if kind == 'segmentor':
        module = SegmentorLogits(model)
    elif kind == 'classifier':
        module = ClassifierLogits(model)
    else:
        module = BackboneMaps(getattr(model, 'backbone', model))
    with torch.no_grad():  # builds the cached relative position index of this grid, a constant when traced
        module.eval()(torch.zeros(1, 3, *shape))
    return module


def check_deterministic(model: nn.Module) -> None:
    """Refuse a ``beit_mm.EoMT`` taken in the middle of its mask annealing: with a masked block's probability strictly
    between 0 and 1 its forward drops masks at random (``anneal_attention_mask``), which an export would freeze into
    one draw. At 0 (annealing done: no masks at inference) or 1 (masks always on) the forward is a function."""
    probs = getattr(model, 'attn_mask_probs', None)
    if probs is None or not getattr(model, 'masked_attn', False):
        return
    if any(0.0 < p < 1.0 for p in probs.tolist()):
        raise ExportError(f'this EoMT checkpoint was taken during mask annealing (masked-attention probabilities '
                          f'{[round(p, 4) for p in probs.tolist()]}): its forward masks queries at random. Fix: export '
                          'a checkpoint from after the annealing ends (mask_annealing.end_steps), whose probabilities '
                          'are 0')


def output_names(module: nn.Module, shape: tuple[int, int]) -> list[str]:
    if isinstance(module, BackboneMaps):
        with torch.no_grad():
            n = len(module(torch.zeros(1, 3, *shape)))
        return [f'feat{i}' for i in range(n)]
    return ['logits']


def preprocess_metadata(cfg: Config) -> dict[str, str]:
    """What a runtime needs to feed the exported model: the config's normalization and channel order."""
    pre = cfg.model.get('data_preprocessor') or cfg.get('data_preprocessor') or {}
    to_rgb = pre.get('bgr_to_rgb', pre.get('to_rgb', False))
    return {'mean': json.dumps(list(pre.get('mean', [0.0, 0.0, 0.0]))),
            'std': json.dumps(list(pre.get('std', [1.0, 1.0, 1.0]))),
            'bgr_to_rgb': json.dumps(bool(to_rgb))}


def export_onnx(model: nn.Module, kind: str, shape: tuple[int, int], out: str, batch: int = 1,
                metadata: dict[str, str] | None = None, opset: int = OPSET) -> list[str]:
    """Write ``model`` (see :func:`export_module`) to the ONNX file ``out``; returns the output names.

    TorchScript-based exporter (``dynamo=False``), constant folding off (module docstring), every shape static: input
    (``batch``, 3, H, W).
    (A dynamic batch axis makes UPerHead's adaptive pooling unexportable: ONNX's AdaptiveAvgPool needs known sizes.)
    ``metadata`` goes into the file's ``metadata_props`` (with ``beit_mm.kind``, ``beit_mm.shape``). The file is
    written atomically (:func:`beit_mm.fileio.outputs.atomic_file`): a kill leaves the old file, the new one or nothing.
    """
    import io

    import onnx

    from ..fileio.outputs import atomic_file
    module = export_module(model, kind, shape)
    names = output_names(module, shape)
    with torch.no_grad(), warnings.catch_warnings():
        # every size is a constant of this export: the tracer's notes about Python ints and constants are expected
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        buffer = io.BytesIO()
        torch.onnx.export(module, (torch.zeros(batch, 3, *shape), ), buffer, input_names=[INPUT_NAME],
                          output_names=names, opset_version=opset, do_constant_folding=False, dynamo=False)
    proto = onnx.load_from_string(buffer.getvalue())
    props = {KIND_KEY: kind, SHAPE_KEY: json.dumps([batch, 3, *shape]), **(metadata or {})}
    size = sum(len(str(k).encode('utf-8', 'replace')) + len(str(v).encode('utf-8', 'replace')) for k, v in props.items())
    if size > MAX_METADATA_BYTES:
        raise ExportError(f'the metadata for {out} takes {size} bytes, more than the {MAX_METADATA_BYTES} an export '
                          'writes; nothing was written. Fix: pass smaller metadata')
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    data = proto.SerializeToString()  # before the temporary file exists: the write itself is one call
    with atomic_file(out) as tmp, open(tmp, 'wb') as f:
        f.write(data)
    return names


def onnx_metadata(path: str) -> dict[str, str]:
    """The ``metadata_props`` of an ONNX file as a dict (:func:`read_onnx`)."""
    return read_onnx(path)[1]


def read_onnx(path: str) -> tuple[bytes, dict[str, str]]:
    """An ONNX file's bytes, read once through the file room, and its ``metadata_props`` as a dict; a named error for
    a missing file or one that is not ONNX (e.g. a ``.pth`` checkpoint)."""
    import onnx
    if not osp.exists(path):
        raise FileNotFoundError(f'ONNX file {path} does not exist. Fix: write it with tools/export.py')
    data = read_input(path, 'ONNX file')  # a regular file (a FIFO or device is refused, never waited on)
    try:
        proto = onnx.load_from_string(data)
    except Exception as error:  # protobuf's DecodeError and friends
        zip_file = data[:4] == b'PK\x03\x04'
        what = 'a PyTorch checkpoint (a zip archive)' if zip_file else f'unreadable as ONNX ({type(error).__name__})'
        raise ValueError(f'{path} is not an ONNX model: {what}. Fix: --onnx takes a file written by tools/export.py; '
                         'a .pth checkpoint is given as CHECKPOINT, without --onnx') from None
    return data, {p.key: p.value for p in proto.metadata_props}


def compare_outputs(got: list, ref: list) -> dict[str, float | int]:
    """onnxruntime outputs against PyTorch's, as arrays of the same shapes (B, C, ...).

    Returns ``max_abs_diff`` over all outputs, and over the positions of dim 1's argmax (pixels or samples)
    ``positions``, ``argmax_differ`` (where the two argmax differ) and ``near_ties`` (those of them where the
    reference's top-2 margin is at most ``2 * max_abs_diff``). When every value is within ``max_abs_diff``, an argmax can change only at
    such a near tie; random weights make near ties common, so float kernels of another CPU may flip a few of them.
    """
    diff = max(float(np.abs(np.asarray(g, np.float64) - np.asarray(r, np.float64)).max()) for g, r in zip(got, ref))
    positions = differ = near = 0
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if r.ndim < 2 or r.shape[1] < 2:
            continue
        top2 = -np.partition(-r, 1, axis=1)[:, :2]
        near_tie = (top2[:, 0] - top2[:, 1]) <= 2 * diff
        flipped = g.argmax(1) != r.argmax(1)
        positions += flipped.size
        differ += int(flipped.sum())
        near += int((flipped & near_tie).sum())
    return {'max_abs_diff': diff, 'positions': positions, 'argmax_differ': differ, 'near_ties': near}


def describe_comparison(result: dict[str, float | int]) -> str:
    """One line for :func:`compare_outputs`: the max |diff| and how far the argmax maps agree."""
    line = f'max |diff| {result["max_abs_diff"]:.2e}, argmax '
    if not result['argmax_differ']:
        return line + 'identical'
    if result['argmax_differ'] == result['near_ties']:
        return line + (f'identical but at {result["argmax_differ"]} of {result["positions"]} positions, all near ties '
                       f'(top-2 margin <= 2 x max |diff|)')
    return line + f'DIFFERENT at {result["argmax_differ"]} of {result["positions"]} positions'
