"""Segmenting images with an ONNX file of ``tools/export.py`` (:mod:`beit_mm.apis.export` writes it and its metadata,
whose keys are imported from there), in Python around onnxruntime: ``tools/infer.py --onnx``.

The config's pipeline, normalization, slide windows and resizing are used as with the checkpoint
(:func:`beit_mm.apis.segment.infer_images`); onnxruntime runs each window at the exported size. A window (or, in
whole mode, an image) smaller than the exported size is zero-padded in normalized space, like mmseg's own padding,
and its scores cropped back; mmseg instead runs such a window at its own size, the only difference between the two
paths. Larger whole images need slide mode or an export at their size.
"""
from __future__ import annotations

import os.path as osp

import numpy as np

from .export import DATASET_META_KEY, INPUT_NAME, KIND_KEY, SHAPE_KEY, read_onnx
from .segment_io import list_images, open_output_folder, output_names, write_outputs

#: The most an ONNX file's ``beit_mm.shape`` may declare per dimension (the batch, then 3, then H and W in pixels).
MAX_EXPORT_SIDE = 2**14


def run_windows(x, run, window: tuple[int, int], mode: str, stride: tuple[int, int] | None):
    """Class scores (1, K, H, W) of a normalized image ``x`` (1, 3, H, W): one call of ``run`` (a (1, 3, h, w) array
    -> (1, K, h, w) scores at the fixed ``window`` size) for ``mode='whole'``, mmseg's slide windows for 'slide'."""
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
    """The input shape ``(batch, 3, H, W)`` a ``tools/export.py`` file declares in its metadata, parsed bounded
    (:func:`beit_mm.fileio.json_file.parse_json`) and checked: four positive ints, 3 channels, each at most
    :data:`MAX_EXPORT_SIDE`, before any array of that size is allocated.

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


def infer_onnx(config: str, onnx_file: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
               overwrite: bool = False) -> dict[str, np.ndarray]:
    """:func:`beit_mm.apis.segment.infer_images` with a ``tools/export.py`` ONNX segmentor run by onnxruntime (module
    docstring)."""
    import onnxruntime as ort
    import torch
    import torch.nn.functional as F
    from mmcv.transforms import Compose, LoadAnnotations
    from mmengine.config import Config
    from mmengine.registry import TRANSFORMS, init_default_scope
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmseg.visualization import SegLocalVisualizer

    from ..fileio.inputs import open_image
    from ..fileio.json_file import JSONFileError, parse_json
    from ..registry import config_type_is
    images = list_images(inputs)
    names = output_names(images)
    folder, planned = open_output_folder(out_dir, images, names, [config, onnx_file, *inputs], overwrite)
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    model_bytes, meta = read_onnx(onnx_file)  # read once, through the file room
    if meta.get(KIND_KEY) != 'segmentor':
        raise ValueError(f'{onnx_file} is not a segmentor export of tools/export.py (kind {meta.get(KIND_KEY)})')
    batch, _, h_win, w_win = exported_shape(meta, onnx_file)
    if batch != 1:
        raise ValueError(f'{onnx_file} was exported for batch {batch}; export with --batch 1 for tools/infer.py')
    pipeline = Compose([t for t in cfg.test_pipeline if not config_type_is(t['type'], LoadAnnotations, TRANSFORMS)])
    preprocessor = MODELS.build(cfg.model.data_preprocessor)
    session = ort.InferenceSession(model_bytes, providers=['CPUExecutionProvider'])
    test_cfg = cfg.model.test_cfg
    align_corners = (cfg.model.get('decode_head') or {}).get('align_corners', False)  # EoMT: bilinear, False
    try:
        dataset_meta = parse_json(meta[DATASET_META_KEY], f'{onnx_file} metadata {DATASET_META_KEY}',
                                  max_bytes=2**20, max_depth=4) if DATASET_META_KEY in meta else None
    except JSONFileError as error:
        raise ValueError(str(error)) from None
    visualizer = SegLocalVisualizer(name=f'onnx_{osp.basename(onnx_file)}', alpha=opacity)
    if dataset_meta:
        visualizer.set_dataset_meta(dataset_meta['classes'], dataset_meta.get('palette'))
    folder.begin(planned)
    preds = {}
    for path, name in zip(images, names):
        data = pipeline(dict(img_path=path))
        batch_data = preprocessor(dict(inputs=[data['inputs']], data_samples=[data['data_samples']]), False)
        x, img_meta = batch_data['inputs'], batch_data['data_samples'][0].metainfo
        logits = run_windows(x, lambda a: session.run(None, {INPUT_NAME: a})[0], (h_win, w_win),
                             test_cfg.get('mode', 'whole'), test_cfg.get('stride'))
        left, right, top, bottom = img_meta.get('img_padding_size', img_meta.get('padding_size', [0] * 4))
        logits = logits[:, :, top:logits.shape[2] - bottom, left:logits.shape[3] - right]
        logits = F.interpolate(logits, size=img_meta['ori_shape'], mode='bilinear', align_corners=align_corners)
        label = logits[0].argmax(0).numpy()
        sample = SegDataSample(pred_sem_seg=PixelData(data=torch.from_numpy(label)[None]))
        image = np.array(open_image(path).convert('RGB'))
        visualizer.add_datasample(name, image, sample, draw_gt=False)
        write_outputs(folder, name, label, visualizer.get_image())
        preds[path] = label
    folder.finish()
    return preds
