"""Segmenting images with an exported ONNX segmentor (:mod:`beit_mm.apis.export`), in Python around onnxruntime.

The config's pipeline and slide windows are used as with the checkpoint; each window runs at the exported size, a
smaller one zero-padded and its scores cropped back. An ONNX file is a program, so its operators, window and running
time are bounded before and while it runs.
"""
from __future__ import annotations

import os.path as osp
import threading
import time

import numpy as np

from ..fileio.names import shown
from .export import (DATASET_META_KEY, DYNAMIC_BATCH_KEY, INPUT_NAME, KIND_KEY, SHAPE_KEY, TASK_KEY,
                     external_tensors, read_onnx)
from .segment_io import list_images, open_output_folder, output_names, write_outputs

#: The most an ONNX file's ``beit_mm.shape`` may declare per dimension (the batch, then 3, then H and W in pixels).
MAX_EXPORT_SIDE = 2**14
#: The most pixels a window may have per pixel of the input it is padded from.
MAX_WINDOW_PADDING = 16
#: Seconds one onnxruntime run (one window) may take before it is stopped.
RUN_TIMEOUT_S = 600.0
#: The operators (default domain) the exporter writes for beit_mm's segmentors (``Range``: the masked-attention
#: slices of a dynamic-batch EoMT), plus elementwise math and reductions of the same families; no control flow.
_EXPORTED = ('Add', 'BatchNormalization', 'Cast', 'Concat', 'Constant', 'ConstantOfShape', 'Conv', 'ConvTranspose',
             'Div', 'Einsum', 'Equal', 'Erf', 'Expand', 'Gather', 'Greater', 'GridSample', 'Identity',
             'LayerNormalization', 'MatMul', 'MaxPool', 'Mul', 'Not', 'Range', 'ReduceSum', 'Relu', 'Reshape', 'Resize',
             'ScatterND', 'Shape', 'Sigmoid', 'Slice', 'Softmax', 'Split', 'Sqrt', 'Squeeze', 'Sub', 'Transpose',
             'Unsqueeze', 'Where')
_ELEMENTWISE = ('Abs', 'And', 'Ceil', 'Clip', 'Cos', 'Exp', 'Flatten', 'Floor', 'Gemm', 'GreaterOrEqual', 'Less',
                'LessOrEqual', 'Log', 'Max', 'Min', 'Mod', 'Neg', 'Or', 'Pad', 'Pow', 'Reciprocal', 'ReduceMax',
                'ReduceMean', 'Sin', 'Tanh', 'Xor')
EXPORTED_OPERATORS = frozenset(_EXPORTED + _ELEMENTWISE)


class OnnxModelError(ValueError):
    """An ONNX file whose graph, window or running time is out of bounds."""


def check_graph(model_bytes: bytes, onnx_file: str) -> None:
    """Refuse a serialized ONNX model that is not one self-contained file of :data:`EXPORTED_OPERATORS` of the
    default domain: a tensor stored as external data (anywhere, :func:`beit_mm.apis.export.external_tensors`),
    control flow, local functions, custom or unknown operators.

    Raises:
        OnnxModelError: naming the tensor, or the operator and its node.

    An external tensor makes onnxruntime open and read another file, resolved from the working directory, when the
    session is created: its bytes would become weights, and through them the outputs.
    """
    import onnx
    proto = onnx.load_from_string(model_bytes)
    fix = ('Fix: export the model again with tools/export.py, which writes none; run only ONNX files you made or '
           'trust')
    external = external_tensors(proto)
    if external:
        raise OnnxModelError(f'{shown(onnx_file)}: {shown(external[0])} is stored as external data (another file, '
                             f'{len(external)} tensor(s) in all), which tools/export.py never writes; an ONNX file '
                             f'must be one file, so no other file was opened and nothing was run. {fix}')
    if len(proto.functions):
        raise OnnxModelError(f'{onnx_file} defines {len(proto.functions)} local function(s) (e.g. '
                             f'{proto.functions[0].name!r}), which tools/export.py never writes. {fix}')
    for node in proto.graph.node:
        graphs = [a.name for a in node.attribute if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)]
        if graphs or node.domain not in ('', 'ai.onnx') or node.op_type not in EXPORTED_OPERATORS:
            what = (f'control flow (its attribute {graphs[0]!r} holds a graph)' if graphs else
                    f'an operator of the domain {node.domain!r}' if node.domain not in ('', 'ai.onnx') else
                    'an operator tools/export.py does not write for beit_mm\'s models')
            raise OnnxModelError(f'{onnx_file}: node {node.name!r} is {node.op_type}, {what}; its running time or '
                                 f'memory is not bounded by its input, so nothing was run. {fix}')


def check_window(window: tuple[int, int], input_hw: tuple[int, int], onnx_file: str) -> None:
    """Refuse a window (``H, W`` of the export) above the pixel limit, or padding an input of ``input_hw`` to more
    than :data:`MAX_WINDOW_PADDING` times its pixels.

    Raises:
        OnnxModelError: naming both sizes.
    """
    from ..fileio.images import LIMIT_VARIABLE, max_image_pixels
    (h_win, w_win), (h_in, w_in) = window, input_hw
    limit = max_image_pixels()
    if h_win * w_win > limit:
        raise OnnxModelError(f'{onnx_file} declares a {h_win}x{w_win} window, {h_win * w_win} pixels, more than the '
                             f'pixel limit of {limit} ({LIMIT_VARIABLE}); nothing was run. Fix: export at the '
                             'config\'s input size (tools/export.py --shape H W)')
    need = min(h_in, h_win) * min(w_in, w_win)
    if h_win * w_win > MAX_WINDOW_PADDING * max(need, 1):
        raise OnnxModelError(f'{onnx_file} declares a {h_win}x{w_win} window for a {h_in}x{w_in} input: padding it '
                             f'costs {h_win * w_win / max(need, 1):.0f}x its pixels, more than {MAX_WINDOW_PADDING}x; '
                             'nothing was run. Fix: export at the size the config feeds the model (tools/export.py '
                             f'--shape {h_in} {w_in}, or the test crop size)')


def run_bounded(session, feeds: dict, onnx_file: str, timeout_s: float = RUN_TIMEOUT_S) -> list:
    """``session.run(None, feeds)`` in a worker thread, stopped after ``timeout_s`` seconds or on Ctrl-C.

    Raises:
        OnnxModelError: the timeout passed.
        KeyboardInterrupt: Ctrl-C, after the run stopped.
    """
    import onnxruntime as ort
    options = ort.RunOptions()
    options.log_severity_level = 4  # the stop is reported here, not also as an onnxruntime error line
    outcome: dict = {}

    done = threading.Event()

    def run() -> None:
        try:
            outcome['value'] = session.run(None, feeds, options)
        except Exception as error:  # noqa: BLE001  (handed to the calling thread)
            outcome['error'] = error
        finally:
            done.set()

    worker = threading.Thread(target=run, name='onnxruntime-run', daemon=True)
    deadline = time.monotonic() + timeout_s
    worker.start()
    try:
        while not done.wait(0.1) and time.monotonic() < deadline:  # short waits: Ctrl-C reaches this thread
            pass
    except BaseException:
        options.terminate = True
        done.wait()
        worker.join()
        raise
    if not done.is_set():
        options.terminate = True
        done.wait()
        worker.join()
        raise OnnxModelError(f'{onnx_file}: one run took more than {timeout_s:g} s and was stopped. Fix: export the '
                             'model again with tools/export.py, or run it on a faster machine with a larger timeout')
    worker.join()
    if 'error' in outcome:
        raise outcome['error']
    return outcome['value']


def run_windows(x, run, window: tuple[int, int], mode: str, stride: tuple[int, int] | None):
    """Class scores (1, K, H, W) of a normalized image ``x`` (1, 3, H, W), ``run`` mapping one ``window``-sized
    array to its scores: once for ``mode='whole'``, over mmseg's slide windows for 'slide'."""
    import torch
    import torch.nn.functional as F
    h_img, w_img = x.shape[2:]
    h_win, w_win = window

    def scores(crop):
        h, w = crop.shape[2:]
        if h > h_win or w > w_win:
            raise ValueError(f'a {h}x{w} input does not fit the exported {h_win}x{w_win} model; use slide mode '
                             f'(test_cfg.mode=\'slide\') or export with --shape {h} {w}')
        padded = F.pad(crop, (0, w_win - w, 0, h_win - h))
        return torch.from_numpy(run(padded.numpy()))[:, :, :h, :w]

    if mode == 'whole':
        return scores(x)
    h_stride, w_stride = stride
    preds, count = None, x.new_zeros((1, 1, h_img, w_img))
    for h_idx in range(max(h_img - h_win + h_stride - 1, 0) // h_stride + 1):  # mmseg slide_inference's windows
        for w_idx in range(max(w_img - w_win + w_stride - 1, 0) // w_stride + 1):
            y2, x2 = min(h_idx * h_stride + h_win, h_img), min(w_idx * w_stride + w_win, w_img)
            y1, x1 = max(y2 - h_win, 0), max(x2 - w_win, 0)
            crop = scores(x[:, :, y1:y2, x1:x2])
            preds = x.new_zeros((1, crop.shape[1], h_img, w_img)) if preds is None else preds
            preds[:, :, y1:y2, x1:x2] += crop
            count[:, :, y1:y2, x1:x2] += 1
    return preds / count


def exported_shape(meta: dict, onnx_file: str) -> tuple[int, int, int, int]:
    """The input shape ``(batch, 3, H, W)`` an export declares in its metadata, checked before any array of that
    size is allocated (each side at most :data:`MAX_EXPORT_SIDE`).

    Raises:
        ValueError: the metadata is missing, not JSON, or not such a shape.
    """
    from ..fileio.json_file import JSONFileError, parse_json
    text = meta.get(SHAPE_KEY)
    if not isinstance(text, str):
        raise ValueError(f'{onnx_file} declares no input shape (metadata {SHAPE_KEY}). Fix: export it with '
                         'tools/export.py')
    try:
        shape = parse_json(text, f'{onnx_file} metadata {SHAPE_KEY}', max_bytes=256, max_depth=1)
    except JSONFileError as error:
        raise ValueError(str(error)) from None
    if (not isinstance(shape, list) or len(shape) != 4 or shape[1] != 3
            or not all(type(v) is int and 0 < v <= MAX_EXPORT_SIDE for v in shape)):
        raise ValueError(f'{onnx_file} declares the input shape {text[:80]!r}, not (batch, 3, H, W) with positive ints '
                         f'up to {MAX_EXPORT_SIDE}. Fix: export it again with tools/export.py')
    return tuple(shape)


def preprocessed_inputs(cfg, images: list[str]):
    """Per image path: the config's test pipeline (annotation loaders dropped) and data preprocessor applied, as
    ``(x (1, 3, H, W) normalized and padded, the sample's metainfo)``; both built now, run image by image."""
    from mmcv.transforms import Compose, LoadAnnotations
    from mmengine.registry import TRANSFORMS
    from mmseg.registry import MODELS

    from ..registry import config_type_is
    pipeline = Compose([t for t in cfg.test_pipeline if not config_type_is(t['type'], LoadAnnotations, TRANSFORMS)])
    preprocessor = MODELS.build(cfg.model.data_preprocessor)

    def each():
        for path in images:
            data = pipeline(dict(img_path=path))
            batch = preprocessor(dict(inputs=[data['inputs']], data_samples=[data['data_samples']]), False)
            yield batch['inputs'], batch['data_samples'][0].metainfo

    return each()


def onnx_dataset_meta(meta: dict, onnx_file: str) -> dict | None:
    """The class names and palette an export stores (``{"classes": [...], "palette": [...] | None}``), or None.

    Raises:
        ValueError: the metadata is not bounded JSON.
        OnnxModelError: a class name holds a control character.
    """
    from ..fileio.json_file import JSONFileError, parse_json
    from ..fileio.names import check_name
    try:
        dataset_meta = parse_json(meta[DATASET_META_KEY], f'{onnx_file} metadata {DATASET_META_KEY}',
                                  max_bytes=2**20, max_depth=4) if DATASET_META_KEY in meta else None
    except JSONFileError as error:
        raise ValueError(str(error)) from None
    for index, name in enumerate((dataset_meta or {}).get('classes') or []):
        check_name(str(name), onnx_file, f'metadata {DATASET_META_KEY} class {index}', OnnxModelError)
    return dataset_meta


def infer_onnx(config: str, onnx_file: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
               overwrite: bool = False, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, np.ndarray]:
    """:func:`beit_mm.apis.segment.infer_images` with an exported ONNX segmentor run by onnxruntime; each window's
    run stopped after ``timeout_s`` seconds.

    Raises:
        OnnxModelError: a graph, window or run out of bounds."""
    import onnxruntime as ort
    import torch
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    from mmseg.visualization import SegLocalVisualizer

    from ..fileio.inputs import open_image
    from .label_maps import upsampled_argmax
    images = list_images(inputs)
    names = output_names(images)
    folder, planned = open_output_folder(out_dir, images, names, [config, onnx_file, *inputs], overwrite)
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    model_bytes, meta = read_onnx(onnx_file)
    if meta.get(KIND_KEY) != 'segmentor':
        raise ValueError(f'{onnx_file} is not a segmentor export of tools/export.py (kind {meta.get(KIND_KEY)})')
    batch, _, h_win, w_win = exported_shape(meta, onnx_file)
    if batch != 1 and meta.get(DYNAMIC_BATCH_KEY) != 'true':
        raise ValueError(f'{onnx_file} was exported for batch {batch}; export with --batch 1 for tools/infer.py')
    if meta.get(TASK_KEY, 'semantic') != 'semantic':
        raise ValueError(f'{shown(onnx_file)} is a {shown(meta[TASK_KEY])} export, and {shown(config)} a semantic '
                         'config. Fix: pass the panoptic or instance config it was exported from')
    check_graph(model_bytes, onnx_file)
    samples = preprocessed_inputs(cfg, images)
    session = ort.InferenceSession(model_bytes, providers=['CPUExecutionProvider'])
    test_cfg = cfg.model.test_cfg
    align_corners = (cfg.model.get('decode_head') or {}).get('align_corners', False)  # EoMT: bilinear, False
    dataset_meta = onnx_dataset_meta(meta, onnx_file)
    visualizer = SegLocalVisualizer(name=f'onnx_{osp.basename(onnx_file)}', alpha=opacity)
    if dataset_meta:
        visualizer.set_dataset_meta(dataset_meta['classes'], dataset_meta.get('palette'))
    folder.begin(planned)
    preds = {}
    for path, name, (x, img_meta) in zip(images, names, samples):
        check_window((h_win, w_win), tuple(x.shape[2:]), onnx_file)
        logits = run_windows(x, lambda a: run_bounded(session, {INPUT_NAME: a}, onnx_file, timeout_s)[0],
                             (h_win, w_win), test_cfg.get('mode', 'whole'), test_cfg.get('stride'))
        left, right, top, bottom = img_meta.get('img_padding_size', img_meta.get('padding_size', [0] * 4))
        logits = logits[:, :, top:logits.shape[2] - bottom, left:logits.shape[3] - right]
        label = upsampled_argmax(logits, tuple(img_meta['ori_shape']), align_corners).numpy()
        sample = SegDataSample(pred_sem_seg=PixelData(data=torch.from_numpy(label)[None]))
        image = np.array(open_image(path).convert('RGB'))
        visualizer.add_datasample(name, image, sample, draw_gt=False)
        write_outputs(folder, name, label, visualizer.get_image())
        preds[path] = label
    folder.finish()
    return preds
