"""Segmenting image files and folders with a segmentation config and checkpoint (a thin layer over mmseg's
``MMSegInferencer``), writing colour overlays and label maps: what ``tools/infer.py`` does, behind
:func:`run_infer` (PyTorch: :func:`infer_images`; an ONNX file of ``tools/export.py``:
:func:`beit_mm.apis.onnx_inference.infer_onnx`; inputs and outputs: :mod:`beit_mm.apis.segment_io`).

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

from typing import Optional, Sequence

import numpy as np

from ..models.builder import resolve_checkpoint
from .onnx_inference import infer_onnx
from .segment_io import list_images, open_output_folder, output_names, write_outputs

def infer_images(config: str, checkpoint: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
                 device: str | None = None, batch_size: int = 1, overwrite: bool = False) -> dict[str, np.ndarray]:
    """Run ``MMSegInferencer`` on ``inputs``; write ``out_dir/vis/<name>`` and ``out_dir/pred/<stem>.png``.

    Returns:
        {image path: predicted label map (H, W) int64, the image's own size}.
    """
    from mmengine.config import Config
    from mmseg.apis import MMSegInferencer

    from ..models.builder import check_loaded_weights, is_segmentor_config, segmentor_inference_weights
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
        return infer_onnx(config, onnx, list(inputs), out_dir, opacity, overwrite)
    return infer_images(config, checkpoint, list(inputs), out_dir, opacity, device, batch_size, overwrite)
