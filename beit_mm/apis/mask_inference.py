"""Panoptic and instance segmentation of image files with a panoptic or instance ``beit_mm.EoMT``, from its checkpoint
or from its ONNX export (:mod:`beit_mm.apis.export`): the config's pipeline and data preprocessor, the raw last
prediction (class logits ``(Q, C + 1)``, mask logits ``(Q, H/4, W/4)``), one post-processing
(:func:`predict_masks`, EoMT's own rules at the original size) and one writer
(:func:`beit_mm.apis.segment_io.write_mask_outputs`), so both give the same segments and instances.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..fileio.names import shown
from .export import DYNAMIC_BATCH_KEY, INPUT_NAME, KIND_KEY, MASK_OUTPUTS, TASK_KEY, read_onnx
from .segment_io import list_images, open_output_folder, output_names, write_mask_outputs

#: The post-processing settings of a mask-classification segmentor, with their config keys.
SETTINGS = ('num_things_classes', 'mask_thresh', 'overlap_thresh', 'top_k_instances')


def config_task(cfg) -> str:
    """``'panoptic'`` or ``'instance'`` for a config of a ``beit_mm.EoMT`` of that task, else ``'semantic'``."""
    from ..models.builder import model_class
    from ..models.segmentors.eomt import EoMT
    if not issubclass(model_class(cfg), EoMT):
        return 'semantic'
    return cfg.model.get('task', 'semantic')


def postprocess_settings(cfg) -> dict:
    """The config's :data:`SETTINGS` (the model's defaults where it sets none); an instance model's classes are all
    things."""
    from ..models.builder import model_class
    defaults = inspect.signature(model_class(cfg).__init__).parameters
    settings = {k: cfg.model.get(k, defaults[k].default) for k in SETTINGS}
    if cfg.model.get('task') == 'instance':
        settings['num_things_classes'] = cfg.model.num_classes
    return settings


def predict_masks(task: str, mask_logits, class_logits, input_size: tuple[int, int], img_shape: tuple[int, int],
                  ori_shape: tuple[int, int], settings: dict):
    """One image's result at ``ori_shape`` from its raw prediction, as ``beit_mm.EoMT.predict`` computes it.

    Args:
        mask_logits: (Q, h, w) of the padded ``input_size`` input; class_logits: (Q, C + 1).
        img_shape: the resized image inside the padded input; settings: :func:`postprocess_settings`.

    Returns:
        panoptic: mmdet's panoptic map (H, W) int64; instance: masks (K, H, W) bool, labels (K,), scores (K,),
        as numpy arrays.
    """
    from ..models.segmentors.mask_postprocess import OriginalSize, instance_results, panoptic_segments
    resize = OriginalSize(input_size, img_shape, ori_shape)
    if task == 'panoptic':
        return panoptic_segments(mask_logits, class_logits, settings['num_things_classes'], settings['mask_thresh'],
                                 settings['overlap_thresh'], resize=resize).cpu().numpy()
    masks, labels, scores = instance_results(mask_logits, class_logits, settings['top_k_instances'], resize=resize)
    return masks.cpu().numpy(), labels.cpu().numpy(), scores.cpu().numpy()


def class_palette(dataset_meta: dict | None, num_classes: int) -> np.ndarray:
    """(C + 1, 3) uint8: the dataset's palette where it has one, fixed random colours for the rest, black for void."""
    palette = np.random.default_rng(0).integers(0, 256, (num_classes + 1, 3)).astype(np.uint8)
    given = (dataset_meta or {}).get('palette') or []
    palette[:min(len(given), num_classes)] = np.asarray(given[:num_classes], np.uint8).reshape(-1, 3)
    palette[num_classes] = 0
    return palette


def _onnx_runner(onnx_file: str, task: str, source: str, timeout_s: float):
    """``(run, dataset_meta)``: ``run`` maps a padded input (1, 3, H, W) to its (mask, class) logits through
    onnxruntime, after the file's kind, task, shape and graph are checked."""
    import onnxruntime as ort
    import torch

    from .onnx_inference import check_graph, check_window, exported_shape, onnx_dataset_meta, run_bounded
    model_bytes, meta = read_onnx(onnx_file)
    if meta.get(KIND_KEY) != 'segmentor' or meta.get(TASK_KEY) != task:
        raise ValueError(f'{shown(onnx_file)} is not a {task} segmentor export of tools/export.py (kind '
                         f'{shown(str(meta.get(KIND_KEY)))}, task {shown(str(meta.get(TASK_KEY)))}) for '
                         f'{shown(source)}. Fix: export it from this config\'s checkpoint')
    batch, _, h_win, w_win = exported_shape(meta, onnx_file)
    if batch != 1 and meta.get(DYNAMIC_BATCH_KEY) != 'true':
        raise ValueError(f'{shown(onnx_file)} was exported for batch {batch}; export with --batch 1 or '
                         '--dynamic-batch')
    check_graph(model_bytes, onnx_file)
    dataset_meta = onnx_dataset_meta(meta, onnx_file)
    session = ort.InferenceSession(model_bytes, providers=['CPUExecutionProvider'])
    names = [o.name for o in session.get_outputs()]
    if names != list(MASK_OUTPUTS):
        raise ValueError(f'{shown(onnx_file)} has the outputs {shown(str(names))}, not {list(MASK_OUTPUTS)}. Fix: '
                         'export it again with tools/export.py')

    def run(x):
        if tuple(x.shape[2:]) != (h_win, w_win):
            check_window((h_win, w_win), tuple(x.shape[2:]), onnx_file)
            raise ValueError(f'{shown(onnx_file)} takes {h_win}x{w_win} inputs, and the config pads this image to '
                             f'{x.shape[2]}x{x.shape[3]}. Fix: export with --shape {x.shape[2]} {x.shape[3]}')
        class_logits, mask_logits = run_bounded(session, {INPUT_NAME: x.numpy()}, onnx_file, timeout_s)
        return torch.from_numpy(mask_logits), torch.from_numpy(class_logits)

    return run, dataset_meta


def _checkpoint_runner(config: str, checkpoint: str, device: str | None):
    """``(run, dataset_meta)`` of the config's model with the checkpoint's weights on ``device``."""
    import json

    import torch

    from ..fileio.checkpoint import checkpoint_meta
    from ..models.builder import inference_weights, load_model, resolve_checkpoint
    from .export import dataset_meta_json
    from mmengine.config import Config
    path = resolve_checkpoint(checkpoint)
    model, _ = load_model(config, path, need=inference_weights(Config.fromfile(config)))
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    model = model.to(device).eval()
    meta = checkpoint_meta(path).get('dataset_meta')  # the weights are loaded above: only the meta is read here
    text = dataset_meta_json(meta, path) if isinstance(meta, dict) and meta else None

    def run(x):
        with torch.no_grad():
            masks, classes = model.forward_predictions(x.to(device))
        return masks[-1].cpu(), classes[-1].cpu()

    return run, json.loads(text) if text else None


def infer_masks(config: str, inputs: list[str], out_dir: str, *, checkpoint: str | None = None,
                onnx_file: str | None = None, opacity: float = 0.5, device: str | None = None,
                overwrite: bool = False, timeout_s: float = 600.0) -> dict:
    """Segment ``inputs`` with the panoptic or instance model of ``config``, from ``checkpoint`` or ``onnx_file``;
    write ``out_dir/pred/`` and ``out_dir/vis/`` (:mod:`beit_mm.apis.segment_io`).

    Returns:
        {image path: :func:`predict_masks`'s result}.

    Raises:
        ValueError: the config is not a panoptic or instance one, or the ONNX file not its export.
        OnnxModelError: an ONNX graph, window or run out of bounds.
    """
    import torch
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    from ..fileio.inputs import open_image
    from .onnx_inference import preprocessed_inputs
    cfg = Config.fromfile(config)
    task = config_task(cfg)
    if task == 'semantic':
        raise ValueError(f'{shown(config)} is not a panoptic or instance EoMT config')
    images = list_images(inputs)
    names = output_names(images)
    folder, planned = open_output_folder(out_dir, images, names, [config, checkpoint, onnx_file, *inputs], overwrite,
                                         task)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    run, dataset_meta = (_onnx_runner(onnx_file, task, config, timeout_s) if onnx_file is not None else
                         _checkpoint_runner(config, checkpoint, device))
    settings = postprocess_settings(cfg)
    palette = class_palette(dataset_meta, cfg.model.num_classes)
    samples = preprocessed_inputs(cfg, images)
    folder.begin(planned)
    results = {}
    for path, name, (x, meta) in zip(images, names, samples):
        mask_logits, class_logits = run(x)
        with torch.no_grad():
            result = predict_masks(task, mask_logits[0], class_logits[0], tuple(x.shape[2:]), meta['img_shape'],
                                   meta['ori_shape'], settings)
        image = np.array(open_image(path).convert('RGB'))
        write_mask_outputs(folder, name, task, result, image, palette, settings['num_things_classes'], opacity)
        results[path] = result
    folder.finish()
    return results
