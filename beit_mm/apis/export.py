"""Export a beit_mm model to ONNX at a fixed input size (mmdeploy's place for mmseg/mmpretrain models).

The input ``input`` is (B, 3, H, W) float32, normalized as the config's ``data_preprocessor`` does (mean, std and
channel order go into the file's metadata); every size is static but the batch, which may be dynamic. Outputs by kind (:func:`export_module`):

- ``'segmentor'``: ``logits`` (B, K, H, W), one whole-image ``encode_decode`` (``beit_mm.EoMT`` included); slide
  windows, flips and scales stay in Python around the exported model. A panoptic or instance ``beit_mm.EoMT``:
  its raw last prediction, ``class_logits`` (B, Q, C + 1) and ``mask_logits`` (B, Q, H/4, W/4), for the Python
  post-processing (:mod:`beit_mm.models.segmentors.mask_postprocess`);
- ``'classifier'``: ``logits`` (B, num_classes), before softmax;
- ``'backbone'``: ``feat0``, ``feat1``, ... the backbone's output maps.

Position tables are resampled to the exported grid before tracing (:func:`fix_input_grid`); constants are not
folded, since folded relative position biases pass ONNX's 2 GB limit at 640 px.
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
from ..fileio.names import MAX_NAME_CHARS
from ..models.builder import is_segmentor_config, model_class

KINDS = ('segmentor', 'classifier', 'backbone')
OPSET = 17  # LayerNormalization is an ONNX op from opset 17
INPUT_NAME = 'input'
#: ``metadata_props`` keys: the model kind (one of :data:`KINDS`), the input shape ``[batch, 3, H, W]`` (JSON), the
#: class names and palette (JSON, segmentors).
KIND_KEY = 'beit_mm.kind'
SHAPE_KEY = 'beit_mm.shape'
#: ``metadata_props`` keys of segmentors: the task (``'semantic'``, ``'panoptic'``, ``'instance'``), and ``'true'``
#: when the batch axis is dynamic (``SHAPE_KEY``'s batch is then the traced one).
TASK_KEY = 'beit_mm.task'
DYNAMIC_BATCH_KEY = 'beit_mm.dynamic_batch'
MASK_OUTPUTS = ('class_logits', 'mask_logits')
DATASET_META_KEY = 'dataset_meta'


class ExportError(ValueError):
    """A model that cannot be exported as asked; the message names the fix."""


#: Bounds of the metadata an export writes from a checkpoint's ``meta.dataset_meta``: through the pickle memo a small
#: file can declare a million long names, so sizes are checked before anything is joined.
MAX_CLASSES = 65536
MAX_CLASS_NAME_CHARS = MAX_NAME_CHARS
MAX_METADATA_BYTES = 2**20  # all metadata_props of one exported file together


def dataset_meta_json(meta, source: str) -> str | None:
    """The JSON text of a checkpoint's ``dataset_meta`` (``{"classes": [...], "palette": [[r, g, b], ...] | null}``)
    as plain, bounded values, or None when it has no ``classes``.

    Raises:
        ExportError: classes or palette not plain names and ``[r, g, b]`` bytes, or over a bound above.
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
    if isinstance(palette, (list, tuple)) and len(palette) > len(classes):
        palette = palette[:len(classes)]  # a dataset's own palette for a config that names fewer classes: i is class i
    if not isinstance(palette, (list, tuple)) or not all(
            isinstance(c, (list, tuple)) and len(c) == 3 and all(type(v) is int and 0 <= v <= 255 for v in c)
            for c in palette):
        raise refuse('palette is not one [r, g, b] of integers 0..255 per class')
    size = sum(len(c.encode('utf-8', 'replace')) + 4 for c in classes) + 16 * len(palette)
    if size > MAX_METADATA_BYTES:
        raise refuse(f'takes about {size} bytes, more than the {MAX_METADATA_BYTES} an export writes')
    return json.dumps({'classes': list(classes), 'palette': [list(c) for c in palette] or None})


def model_kind(cfg: Config) -> str:
    """'segmentor' (an mmseg segmentor), 'classifier' (mmpretrain ``ImageClassifier``) or 'backbone' (anything
    else, e.g. a MIM model, of which only the backbone is exported); a subclass counts as its base class."""
    if is_segmentor_config(cfg):
        return 'segmentor'
    if issubclass(model_class(cfg), ImageClassifier):
        return 'classifier'
    return 'backbone'


def fix_input_grid(model: nn.Module, shape: tuple[int, int]) -> None:
    """Resample, in place, every BEiT's position tables of ``model`` to the ``(H/p, W/p)`` grid of ``shape``, so its
    forward at that size resamples nothing and computes the same function.

    Raises:
        ExportError: ``shape`` is not divisible by a BEiT's patch size.
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
                    attn.attn_impl = 'eager'  # the same function as SDPA, as a plain graph
                if isinstance(attn, BEiTAttention) and attn.relative_position_bias_table is not None:
                    attn.relative_position_bias_table = nn.Parameter(
                        resize_rel_pos_bias_table(attn.relative_position_bias_table, attn.grid, grid))
                    attn.grid = grid
        module.grid = grid


def pool_matrix(size: int, out: int) -> Tensor:
    """(out, size) matrix whose row i averages the cells ``[floor(i * size / out), ceil((i + 1) * size / out))``,
    adaptive average pooling's window i."""
    rows = []
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    return torch.tensor(rows)  # built from Python values: a constant when traced


class MatrixAdaptiveAvgPool2d(nn.Module):
    """``nn.AdaptiveAvgPool2d`` as ``P_h @ x @ P_w^T`` with constant window-averaging matrices (:func:`pool_matrix`).

    ONNX's exporter handles adaptive pooling only when the output size divides the input size, which UPerNet's
    pyramid pooling at 512 px does not; at a fixed input size the matrices are constants.
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


class MaskLogits(nn.Module):
    """A panoptic or instance ``beit_mm.EoMT`` -> its last prediction's ``class_logits`` (B, Q, C + 1) and
    ``mask_logits`` (B, Q, H/4, W/4), raw."""

    def __init__(self, segmentor: nn.Module) -> None:
        super().__init__()
        self.segmentor = segmentor

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        masks, classes = self.segmentor.forward_predictions(x)
        return classes[-1], masks[-1]


def segmentor_task(model: nn.Module) -> str:
    """``'panoptic'`` or ``'instance'`` for a mask-classification segmentor of that task, else ``'semantic'``."""
    return getattr(model, 'task', 'semantic')


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
    """A copy of ``model`` in eval mode, fixed for ``shape``, wrapped to return plain tensors of ``kind``."""
    if kind not in KINDS:
        raise ValueError(f'unknown export kind {kind!r}; choose one of {KINDS}')
    model = copy.deepcopy(model).eval()
    check_deterministic(model)
    fix_input_grid(model, shape)
    replace_adaptive_pooling(model)
    if kind == 'segmentor':
        module = SegmentorLogits(model) if segmentor_task(model) == 'semantic' else MaskLogits(model)
    elif kind == 'classifier':
        module = ClassifierLogits(model)
    else:
        module = BackboneMaps(getattr(model, 'backbone', model))
    with torch.no_grad():  # caches the relative position index, a constant when traced
        module.eval()(torch.zeros(1, 3, *shape))
    return module


def check_deterministic(model: nn.Module) -> None:
    """Refuse a ``beit_mm.EoMT`` taken during its mask annealing, whose forward drops masks at random: an export would
    freeze one draw."""
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
    return list(MASK_OUTPUTS) if isinstance(module, MaskLogits) else ['logits']


def preprocess_metadata(cfg: Config) -> dict[str, str]:
    """What a runtime needs to feed the exported model: the config's normalization and channel order."""
    pre = cfg.model.get('data_preprocessor') or cfg.get('data_preprocessor') or {}
    to_rgb = pre.get('bgr_to_rgb', pre.get('to_rgb', False))
    return {'mean': json.dumps(list(pre.get('mean', [0.0, 0.0, 0.0]))),
            'std': json.dumps(list(pre.get('std', [1.0, 1.0, 1.0]))),
            'bgr_to_rgb': json.dumps(bool(to_rgb))}


def export_onnx(model: nn.Module, kind: str, shape: tuple[int, int], out: str, batch: int = 1,
                metadata: dict[str, str] | None = None, opset: int = OPSET, dynamic_batch: bool = False) -> list[str]:
    """Write ``model`` (see :func:`export_module`) to the ONNX file ``out`` atomically; returns the output names.

    TorchScript-based exporter, constant folding off, input (``batch``, 3, H, W) static, or with a dynamic batch axis
    (input and outputs) when ``dynamic_batch``. ``metadata`` goes into ``metadata_props`` with the kind, the shape and
    a segmentor's task.
    """
    import io

    import onnx

    from ..fileio.outputs import atomic_file
    module = export_module(model, kind, shape)
    check_one_file(module, out)
    names = output_names(module, shape)
    with torch.no_grad(), warnings.catch_warnings():
        # every size is a constant of this export
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        buffer = io.BytesIO()
        axes = {name: {0: 'batch'} for name in (INPUT_NAME, *names)} if dynamic_batch else None
        torch.onnx.export(module, (torch.zeros(batch, 3, *shape), ), buffer, input_names=[INPUT_NAME],
                          output_names=names, opset_version=opset, do_constant_folding=False, dynamo=False,
                          dynamic_axes=axes)
    proto = onnx.load_from_string(buffer.getvalue())
    if external_tensors(proto):  # an exporter that chose external data by itself
        from ..fileio.names import shown
        raise ExportError(f'the export for {shown(out)} stores {shown(external_tensors(proto)[0])} as external data; '
                          'nothing was written. Fix: export a model under 2 GiB of weights')
    props = {KIND_KEY: kind, SHAPE_KEY: json.dumps([batch, 3, *shape]), **(metadata or {})}
    if kind == 'segmentor':
        props[TASK_KEY] = segmentor_task(model)
    if dynamic_batch:
        props[DYNAMIC_BATCH_KEY] = 'true'
    size = sum(len(str(k).encode('utf-8', 'replace')) + len(str(v).encode('utf-8', 'replace')) for k, v in props.items())
    if size > MAX_METADATA_BYTES:
        raise ExportError(f'the metadata for {out} takes {size} bytes, more than the {MAX_METADATA_BYTES} an export '
                          'writes; nothing was written. Fix: pass smaller metadata')
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    data = proto.SerializeToString()
    with atomic_file(out) as tmp, open(tmp, 'wb') as f:
        f.write(data)
    return names


#: ONNX's one-file limit: a protobuf message is at most 2 GiB.
MAX_ONNX_BYTES = 2**31 - 1


def external_tensors(proto) -> list[str]:
    """Where an ONNX ``ModelProto`` keeps a tensor as external data (``data_location == EXTERNAL`` or an
    ``external_data`` entry): initializers, sparse initializers, tensor attributes of nodes (``Constant`` and any
    other), in the main graph, every subgraph and every local function; each as ``'<what> <name>'``.
    """
    import onnx
    found: list[str] = []

    def tensor(t, what: str) -> None:
        if t.data_location == onnx.TensorProto.EXTERNAL or len(t.external_data):
            found.append(f'{what} {t.name!r}')

    def sparse(t, what: str) -> None:
        tensor(t.values, f'{what} values')
        tensor(t.indices, f'{what} indices')

    def nodes(items, where: str) -> None:
        for node in items:
            for a in node.attribute:
                what = f'{where}node {node.name!r} ({node.op_type}) attribute {a.name!r}'
                for t in [a.t] * a.HasField('t') + list(a.tensors):
                    tensor(t, what)
                for t in [a.sparse_tensor] * a.HasField('sparse_tensor') + list(a.sparse_tensors):
                    sparse(t, what)
                for g in [a.g] * a.HasField('g') + list(a.graphs):
                    graph(g, f'{what}: ')

    def graph(g, where: str) -> None:
        for t in g.initializer:
            tensor(t, f'{where}initializer')
        for t in g.sparse_initializer:
            sparse(t, f'{where}sparse initializer')
        nodes(g.node, where)

    graph(proto.graph, '')
    for function in proto.functions:
        nodes(function.node, f'function {function.name!r}: ')
    return found


def check_one_file(module: nn.Module, out: str) -> None:
    """Refuse a model whose weights and buffers alone pass :data:`MAX_ONNX_BYTES`: one ONNX file cannot hold them,
    and an export never writes external data.

    Raises:
        ExportError: naming the size and the fix.
    """
    size = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    if size > MAX_ONNX_BYTES:
        from ..fileio.names import shown
        raise ExportError(f'the model for {shown(out)} holds {size / 2**30:.2f} GiB of weights, more than the 2 GiB one '
                          'ONNX file holds; tools/export.py writes no external data, so nothing was written. Fix: '
                          'export a smaller model, or its backbone (--part backbone)')


def onnx_metadata(path: str) -> dict[str, str]:
    """The ``metadata_props`` of an ONNX file as a dict (:func:`read_onnx`)."""
    return read_onnx(path)[1]


def read_onnx(path: str) -> tuple[bytes, dict[str, str]]:
    """An ONNX file's bytes and its ``metadata_props`` as a dict.

    Raises:
        FileNotFoundError, ValueError: the file is missing or not ONNX (e.g. a ``.pth`` checkpoint).
    """
    import onnx
    if not osp.exists(path):
        raise FileNotFoundError(f'ONNX file {path} does not exist. Fix: write it with tools/export.py')
    data = read_input(path, 'ONNX file')
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

    Returns ``max_abs_diff`` over all outputs and, over the positions of dim 1's argmax, ``positions``,
    ``argmax_differ`` and ``near_ties`` (those where the reference's top-2 margin is at most ``2 * max_abs_diff``,
    the only places an argmax can flip while every value is within ``max_abs_diff``).
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
