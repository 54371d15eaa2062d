"""Segment images or folders with a beit_mm segmentation config and checkpoint (a thin CLI over mmseg's
``MMSegInferencer``), writing colour overlays and label maps.

    python tools/infer.py CONFIG CHECKPOINT INPUT [INPUT ...] [--out-dir DIR] [--opacity A] [--device cpu|cuda]
    python tools/infer.py CONFIG --onnx FILE INPUT [INPUT ...] [--out-dir DIR] [--opacity A]

- ``CHECKPOINT``: a ``.pth`` file, or a work dir (its ``last_checkpoint``, i.e. what ``tools/train.py`` wrote last).
- ``INPUT``: image files and/or folders (every image directly inside a folder, sorted by name); each image must be a
  regular file (a FIFO or device is refused, never waited on) within the pixel limit (``BEIT_MM_MAX_IMAGE_PIXELS``,
  Pillow's by default), checked from its header before the model is built (docs/faults.md).
- Writes ``DIR/vis/<image path>``: the image with the predicted classes painted over it (``--opacity``, mmseg's
  ``SegLocalVisualizer``, class names and palette from the checkpoint's ``meta.dataset_meta``), and
  ``DIR/pred/<image path without suffix>.png``: the predicted label map (uint8 class indices, the config's label
  space; for the ADE20K configs 0..149 = ADE20K classes 1..150). ``<image path>`` is the image's path relative to the
  folder all inputs share (one folder given: its file names), so images of the same name in different folders never
  overwrite each other; two images whose label maps would share a name (``a.jpg`` and ``a.png``) are refused,
  naming both.
- ``DIR`` is an output folder (:class:`beit_mm.fileio.output_folder.OutputFolder`): new, empty, or written by an
  earlier run, whose files ``--overwrite`` replaces (only those: the folder's manifest ``.beit_mm_output.json`` lists
  them by content); it may not be a link, hold or lie inside an input (images, folders, checkpoint, config), or lie in
  a dataset root. Checked before the model is built; each file is written atomically.
- The checkpoint must fit the config's model (no weight of another shape, every backbone/neck/decode head weight
  present): another model's checkpoint is a named error before any image is segmented.
- The config's test pipeline (resize) and ``test_cfg`` (whole image or slide windows) are used, as ``tools/test.py``.
- ``--onnx FILE`` (a file of ``tools/export.py``; no CHECKPOINT then): the same pipeline, normalization, slide windows
  and resizing, in Python around onnxruntime, which runs each window at the exported size. A window (or, in whole
  mode, an image) smaller than the exported size is zero-padded in normalized space, like mmseg's own padding, and
  its scores cropped back; mmseg instead runs such a window at its own size, the only difference between the two
  paths. Larger whole images need slide mode or an export at their size.
"""
from __future__ import annotations

import argparse
import os
import os.path as osp

import numpy as np
from PIL import Image

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.apis import resolve_checkpoint

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Segment images with a beit_mm config and checkpoint')
    parser.add_argument('config', help='segmentation config file')
    parser.add_argument('paths', nargs='+', metavar='CHECKPOINT INPUT',
                        help='checkpoint file or work dir (not with --onnx), then image files and/or folders')
    parser.add_argument('--onnx', default=None, metavar='FILE', help='run this tools/export.py file with onnxruntime')
    parser.add_argument('--out-dir', default='work_dirs/infer', help='output folder (vis/ and pred/ inside)')
    parser.add_argument('--opacity', type=float, default=0.5, help='opacity of the painted classes, in (0, 1]')
    parser.add_argument('--device', default=None, help="'cpu', 'cuda', ... (default: cuda if available)")
    parser.add_argument('--batch-size', type=int, default=1, help='images per forward pass')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the files an earlier run wrote into --out-dir (only those; refused otherwise)')
    args = parser.parse_args()
    if args.onnx is None:
        if len(args.paths) < 2:
            parser.error('give CHECKPOINT and at least one INPUT (or --onnx FILE and INPUTs)')
        args.checkpoint, args.inputs = args.paths[0], args.paths[1:]
    else:
        args.checkpoint, args.inputs = None, args.paths
    return args


def list_images(inputs: list[str]) -> list[str]:
    """Image files of ``inputs`` (files kept in order, folders expanded to their sorted images, repeats dropped), each
    a regular file whose header is an image's within the pixel limit
    (:func:`beit_mm.fileio.images.check_image_file`), checked before the model is built.

    Raises:
        FileNotFoundError: an input that does not exist, or a folder without images; NotARegularFileError (one): an
            input or a folder's image that is a FIFO, a device or a socket.
        ImageTooLargeError (a ValueError): an image over the pixel limit.
        ValueError: a file that is not an image.
    """
    from beit_mm.fileio.inputs import check_image_file
    images = []
    for item in inputs:
        if osp.isdir(item):
            found = sorted(osp.join(item, f) for f in os.listdir(item) if f.lower().endswith(IMAGE_SUFFIXES))
            if not found:
                raise FileNotFoundError(f'folder {item} has no images ({", ".join(IMAGE_SUFFIXES)})')
            images += found
        elif osp.exists(item) or osp.islink(item):
            images.append(item)
        else:
            raise FileNotFoundError(f'input {item} is neither an image file nor a folder')
    for image in images:
        check_image_file(image)
    seen = set()
    return [p for p in images if not (osp.realpath(p) in seen or seen.add(osp.realpath(p)))]


def output_names(images: list[str]) -> list[str]:
    """Each image's path relative to the folder all images share: unique names under ``vis/`` and ``pred/``."""
    folders = [osp.dirname(osp.abspath(p)) for p in images]
    common = osp.commonpath(folders) if images else ''
    return [osp.relpath(osp.abspath(p), common) for p in images]


def prediction_name(name: str) -> str:
    """The label map's path under ``pred/`` of the image named ``name`` (its path without suffix, ``.png``)."""
    return osp.splitext(name)[0] + '.png'


def planned_outputs(images: list[str], names: list[str]) -> list[str]:
    """Every file a run writes (``vis/<name>``, ``pred/<stem>.png``, ``/``-separated).

    Raises:
        OutputError: two images whose label maps would share one file (``a.jpg`` and ``a.png``), named.
    """
    from beit_mm.fileio.outputs import OutputError
    owner = {}
    for image, name in zip(images, names):
        pred = prediction_name(name)
        if pred in owner:
            raise OutputError(f'inputs {owner[pred]} and {image} would both write the label map pred/{pred}; nothing '
                              'was written. Fix: rename one of them, or segment them in two runs with two --out-dir')
        owner[pred] = image
    return [f'{folder}/{rel.replace(os.sep, "/")}' for name in names
            for folder, rel in (('vis', name), ('pred', prediction_name(name)))]


def open_output_folder(out_dir: str, images: list[str], names: list[str], inputs: list[str | None],
                       overwrite: bool):
    """``(folder, planned)``: the output folder, checked before any work
    (:class:`beit_mm.fileio.output_folder.OutputFolder`; no input may be, hold or contain it), and the files this run
    writes there (:meth:`OutputFolder.begin` announces them and removes an earlier run's)."""
    from beit_mm.fileio.output_folder import OutputFolder
    planned = planned_outputs(images, names)
    folder = OutputFolder(out_dir, 'tools/infer.py', overwrite, inputs=[*inputs, *images], flag='--overwrite')
    return folder, planned


def save_image(array: np.ndarray, folder, rel: str) -> None:
    """Write an image atomically into the output folder (:meth:`OutputFolder.file`), in the format its suffix
    names."""
    suffix = osp.splitext(rel)[1].lower()
    with folder.file(rel) as tmp:
        Image.fromarray(array).save(tmp, format=Image.registered_extensions().get(suffix, 'PNG'))


def write_outputs(folder, name: str, label: np.ndarray, overlay: np.ndarray) -> None:
    """``pred/<name without suffix>.png`` (uint8 label map) and ``vis/<name>`` (the overlay) in the output folder."""
    name = name.replace(os.sep, '/')
    save_image(label.astype(np.uint8), folder, 'pred/' + prediction_name(name))
    save_image(overlay, folder, 'vis/' + name)


def infer(config: str, checkpoint: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
          device: str | None = None, batch_size: int = 1, overwrite: bool = False) -> dict[str, np.ndarray]:
    """Run ``MMSegInferencer`` on ``inputs``; write ``out_dir/vis/<name>`` and ``out_dir/pred/<stem>.png``.

    Returns:
        {image path: predicted label map (H, W) int64, the image's own size}.
    """
    from mmengine.config import Config
    from mmseg.apis import MMSegInferencer

    cfg = Config.fromfile(config)
    from beit_mm.apis.inference import check_loaded_weights, is_segmentor_config, segmentor_inference_weights
    if cfg.get('default_scope', 'mmseg') != 'mmseg' or not is_segmentor_config(cfg):
        raise ValueError(f'{config} is not a segmentation config (default_scope mmseg with a decode_head, or '
                         'beit_mm.EoMT); tools/infer.py segments images')
    images = list_images(inputs)
    names = output_names(images)
    path = resolve_checkpoint(checkpoint)
    folder, planned = open_output_folder(out_dir, images, names, [config, path, *inputs], overwrite)
    inferencer = MMSegInferencer(model=cfg, weights=path, device=device)
    check_loaded_weights(inferencer.model, path, segmentor_inference_weights(cfg), f'{path} (with config {config})')
    folder.begin(planned)
    preds = {}
    for start in range(0, len(images), batch_size):  # written batch by batch, so a long run keeps what it made
        batch = images[start:start + batch_size]
        result = inferencer(batch, opacity=opacity, batch_size=batch_size, return_vis=True)
        labels, overlays = result['predictions'], result['visualization']
        labels, overlays = (labels, overlays) if len(batch) > 1 else ([labels], [overlays])
        for image_path, name, label, overlay in zip(batch, names[start:], labels, overlays):
            write_outputs(folder, name, label, overlay)
            preds[image_path] = label
    folder.finish()
    return preds


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


#: The most an ONNX file's ``beit_mm.shape`` may declare per dimension (the batch, then 3, then H and W in pixels).
MAX_EXPORT_SIDE = 2**14


def exported_shape(meta: dict, onnx_file: str) -> tuple[int, int, int, int]:
    """The input shape ``(batch, 3, H, W)`` a ``tools/export.py`` file declares in its metadata, parsed bounded
    (:func:`beit_mm.fileio.json_file.parse_json`) and checked: four positive ints, 3 channels, each at most
    :data:`MAX_EXPORT_SIDE`, before any array of that size is allocated.

    Raises:
        ValueError: the metadata is missing, not JSON, or not such a shape.
    """
    from beit_mm.fileio.json_file import JSONFileError, parse_json
    text = meta.get('beit_mm.shape')
    if not isinstance(text, str):
        raise ValueError(f'{onnx_file} declares no input shape (metadata beit_mm.shape). Fix: export it with '
                         'tools/export.py')
    try:
        shape = parse_json(text, f'{onnx_file} metadata beit_mm.shape', max_bytes=256, max_depth=1)
    except JSONFileError as error:
        raise ValueError(str(error)) from None
    if (not isinstance(shape, list) or len(shape) != 4 or shape[1] != 3
            or not all(type(v) is int and 0 < v <= MAX_EXPORT_SIDE for v in shape)):
        raise ValueError(f'{onnx_file} declares the input shape {text[:80]!r}, not (batch, 3, H, W) with positive ints '
                         f'up to {MAX_EXPORT_SIDE}. Fix: export it again with tools/export.py')
    return tuple(shape)


def infer_onnx(config: str, onnx_file: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
               overwrite: bool = False) -> dict[str, np.ndarray]:
    """:func:`infer` with a ``tools/export.py`` ONNX segmentor run by onnxruntime (module docstring)."""
    import onnxruntime as ort
    import torch
    import torch.nn.functional as F
    from mmcv.transforms import Compose
    from mmengine.config import Config
    from mmcv.transforms import LoadAnnotations
    from mmengine.registry import TRANSFORMS, init_default_scope

    from beit_mm.registry import config_type_is
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    from mmseg.visualization import SegLocalVisualizer

    from beit_mm.apis.export import INPUT_NAME, onnx_metadata
    from beit_mm.fileio.inputs import open_image
    from beit_mm.fileio.json_file import JSONFileError, parse_json
    images = list_images(inputs)
    names = output_names(images)
    folder, planned = open_output_folder(out_dir, images, names, [config, onnx_file, *inputs], overwrite)
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    meta = onnx_metadata(onnx_file)
    if meta.get('beit_mm.kind') != 'segmentor':
        raise ValueError(f'{onnx_file} is not a segmentor export of tools/export.py (kind {meta.get("beit_mm.kind")})')
    batch, _, h_win, w_win = exported_shape(meta, onnx_file)
    if batch != 1:
        raise ValueError(f'{onnx_file} was exported for batch {batch}; export with --batch 1 for tools/infer.py')
    pipeline = Compose([t for t in cfg.test_pipeline if not config_type_is(t['type'], LoadAnnotations, TRANSFORMS)])
    preprocessor = MODELS.build(cfg.model.data_preprocessor)
    session = ort.InferenceSession(onnx_file, providers=['CPUExecutionProvider'])
    test_cfg = cfg.model.test_cfg
    align_corners = (cfg.model.get('decode_head') or {}).get('align_corners', False)  # EoMT: bilinear, False
    try:
        dataset_meta = parse_json(meta['dataset_meta'], f'{onnx_file} metadata dataset_meta', max_bytes=2**20,
                                  max_depth=4) if 'dataset_meta' in meta else None
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


def main() -> None:
    from beit_mm.apis.checkpoint import CheckpointFileError, CheckpointMismatchError
    from beit_mm.fileio.outputs import OutputError
    try:
        run(parse_args())
    except (CheckpointFileError, CheckpointMismatchError, OutputError, FileNotFoundError, ValueError) as error:
        raise SystemExit(f'infer: {error}') from None


def run(args: argparse.Namespace) -> None:
    if args.onnx is not None:
        preds = infer_onnx(args.config, args.onnx, args.inputs, args.out_dir, args.opacity, args.overwrite)
    else:
        preds = infer(args.config, args.checkpoint, args.inputs, args.out_dir, args.opacity, args.device,
                      args.batch_size, args.overwrite)
    print(f'segmented {len(preds)} images: overlays in {osp.join(args.out_dir, "vis")}, label maps in '
          f'{osp.join(args.out_dir, "pred")}')


if __name__ == '__main__':
    main()
