"""Segmenting image files and folders with a config and a checkpoint or an ONNX file (:func:`run_infer`): overlays
under ``out_dir/vis/<image path>``, uint8 label maps under ``out_dir/pred/<image path without suffix>.png``, the
paths relative to the folder the inputs share. Everything is checked before the model runs.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..models.builder import resolve_checkpoint
from .label_maps import stream_class_scores
from .onnx_inference import infer_onnx
from .segment_io import list_images, open_output_folder, output_names, write_outputs


def infer_images(config: str, checkpoint: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
                 device: str | None = None, batch_size: int = 1, overwrite: bool = False) -> dict[str, np.ndarray]:
    """Run ``MMSegInferencer`` on ``inputs``; write ``out_dir/vis/<name>`` and ``out_dir/pred/<stem>.png``. The
    class scores are resized to each image one class at a time (:mod:`.label_maps`: at most
    :data:`~.label_maps.BYTES_PER_PIXEL` bytes per input pixel for them, mmseg's labels).

    Returns:
        {image path: predicted label map (H, W) int64, the image's own size}.

    Raises:
        ValueError: ``config`` is not a segmentation config.
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
    stream_class_scores(inferencer.model)
    check_loaded_weights(inferencer.model, path, segmentor_inference_weights(cfg), f'{path} (with config {config})')
    folder.begin(planned)
    preds = {}
    for start in range(0, len(images), batch_size):  # batch by batch: a long run keeps what it made
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
    """:func:`infer_images` with ``checkpoint``, or :func:`beit_mm.apis.onnx_inference.infer_onnx` with the ``onnx``
    file (``checkpoint`` None then); a panoptic or instance EoMT config with either, by
    :func:`beit_mm.apis.mask_inference.infer_masks`. The keywords are the inference entry point's flags.

    Returns:
        {image path: predicted label map (H, W)}; panoptic: mmdet's panoptic map (H, W); instance: (masks, labels,
        scores).

    Raises:
        CheckpointFileError, CheckpointMismatchError, OutputError, FileNotFoundError, ValueError: refusals, before
            any output is written.
    """
    from mmengine.config import Config

    from .mask_inference import config_task, infer_masks
    if config_task(Config.fromfile(config)) != 'semantic':  # panoptic or instance: both paths in one module
        return infer_masks(config, list(inputs), out_dir, checkpoint=checkpoint, onnx_file=onnx, opacity=opacity,
                           device=device, overwrite=overwrite)
    if onnx is not None:
        return infer_onnx(config, onnx, list(inputs), out_dir, opacity, overwrite)
    return infer_images(config, checkpoint, list(inputs), out_dir, opacity, device, batch_size, overwrite)
