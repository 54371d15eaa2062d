"""Segmenting image files and folders with a segmentation config and checkpoint (a thin layer over mmseg's
``MMSegInferencer``), writing colour overlays and label maps: what ``tools/infer.py`` does, behind
:func:`run_infer` (PyTorch: :func:`infer_images`; an ONNX file of ``tools/export.py``:
:func:`beit_mm.apis.onnx_inference.infer_onnx`).

- ``checkpoint``: a ``.pth`` file, or a work dir (its ``last_checkpoint``, i.e. what ``tools/train.py`` wrote last).
- ``inputs``: image files and/or folders (every image directly inside a folder, sorted by name); each image must be a
  regular file (a FIFO or device is refused, never waited on) within the pixel limit (``BEIT_MM_MAX_IMAGE_PIXELS``,
  Pillow's by default), checked from its header before the model is built (docs/faults.md).
- Writes ``out_dir/vis/<image path>``: the image with the predicted classes painted over it (``opacity``, mmseg's
  ``SegLocalVisualizer``, class names and palette from the checkpoint's ``meta.dataset_meta``), and
  ``out_dir/pred/<image path without suffix>.png``: the predicted label map (uint8 class indices, the config's label
  space; for the ADE20K configs 0..149 = ADE20K classes 1..150). ``<image path>`` is the image's path relative to the
  folder all inputs share (one folder given: its file names), so images of the same name in different folders never
  overwrite each other; two images whose label maps would share a name (``a.jpg`` and ``a.png``) are refused,
  naming both.
- ``out_dir`` is an output folder (:class:`beit_mm.fileio.output_folder.OutputFolder`): new, empty, or written by an
  earlier run, whose files ``overwrite`` replaces (only those: the folder's manifest ``.beit_mm_output.json`` lists
  them by content); it may not be a link, hold or lie inside an input (images, folders, checkpoint, config), or lie in
  a dataset root. Checked before the model is built; each file is written atomically.
- The checkpoint must fit the config's model (no weight of another shape, every backbone/neck/decode head weight
  present): another model's checkpoint is a named error before any image is segmented.
- The config's test pipeline (resize) and ``test_cfg`` (whole image or slide windows) are used, as ``tools/test.py``.
"""
from __future__ import annotations

import os
import os.path as osp
from typing import Optional, Sequence

import numpy as np
from PIL import Image

from .inference import resolve_checkpoint

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
TOOL = 'tools/infer.py'


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
    from ..fileio.inputs import check_image_file
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
    from ..fileio.outputs import OutputError
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
    from ..fileio.output_folder import OutputFolder
    planned = planned_outputs(images, names)
    folder = OutputFolder(out_dir, TOOL, overwrite, inputs=[*inputs, *images], flag='--overwrite')
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


def infer_images(config: str, checkpoint: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
                 device: str | None = None, batch_size: int = 1, overwrite: bool = False) -> dict[str, np.ndarray]:
    """Run ``MMSegInferencer`` on ``inputs``; write ``out_dir/vis/<name>`` and ``out_dir/pred/<stem>.png``.

    Returns:
        {image path: predicted label map (H, W) int64, the image's own size}.
    """
    from mmengine.config import Config
    from mmseg.apis import MMSegInferencer

    from .inference import check_loaded_weights, is_segmentor_config, segmentor_inference_weights
    cfg = Config.fromfile(config)
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


def run_infer(config: str, checkpoint: Optional[str], inputs: Sequence[str], *, onnx: Optional[str] = None,
              out_dir: str = 'work_dirs/infer', opacity: float = 0.5, device: Optional[str] = None,
              batch_size: int = 1, overwrite: bool = False) -> dict[str, np.ndarray]:
    """What ``tools/infer.py`` does (the keywords are its flags): :func:`infer_images` with ``checkpoint``, or
    :func:`beit_mm.apis.onnx_inference.infer_onnx` with the ``onnx`` file (``checkpoint`` None then).

    Returns:
        {image path: predicted label map (H, W)}.

    Raises:
        CheckpointFileError, CheckpointMismatchError, OutputError, FileNotFoundError, ValueError: refusals whose
            message names the problem and the fix, before any output is written.
    """
    if onnx is not None:
        from .onnx_inference import infer_onnx
        return infer_onnx(config, onnx, list(inputs), out_dir, opacity, overwrite)
    return infer_images(config, checkpoint, list(inputs), out_dir, opacity, device, batch_size, overwrite)
