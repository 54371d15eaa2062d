"""The inputs and outputs of segmenting image files and folders: the input images, checked from their headers; their
names under ``vis/`` and ``pred/``; the output folder; the label maps, panoptic and instance results and overlays,
each written atomically.

Per image ``<stem>`` (its path without suffix), by task:

- semantic: ``pred/<stem>.png``, the uint8 label map;
- panoptic: ``pred/<stem>.png``, COCO's panoptic PNG (RGB, segment id = R + 256 G + 256^2 B, 0 = void) and
  ``pred/<stem>.json``, ``{"file_name", "segments_info": [{"id", "category_id", "isthing", "area"}]}`` with
  ``category_id`` the config's class index (panopticapi's and mmdet's ``CocoPanopticMetric`` layout);
- instance: ``pred/<stem>.json``, mmdet's ``DetInferencer`` layout: ``{"labels", "scores", "bboxes" (x1, y1, x2,
  y2), "masks"}``, the masks as COCO RLE (``{"size": [H, W], "counts": str}``).

Each also writes ``vis/<name>``, the image with the predicted classes painted over it.
"""
from __future__ import annotations

import json
import os
import os.path as osp

import numpy as np
from PIL import Image

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
TOOL = 'tools/infer.py'
TASKS = ('semantic', 'panoptic', 'instance')


def list_images(inputs: list[str]) -> list[str]:
    """Image files of ``inputs`` (files in order, folders expanded to their sorted images, repeats dropped), each a
    regular file whose header is an image's within the pixel limit.

    Raises:
        FileNotFoundError: a missing input, a folder without images, or no regular file.
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


def prediction_files(name: str, task: str = 'semantic') -> list[str]:
    """The files under ``pred/`` of the image named ``name`` for ``task`` (module docstring)."""
    stem = osp.splitext(name)[0]
    return {'semantic': [stem + '.png'], 'panoptic': [stem + '.png', stem + '.json'],
            'instance': [stem + '.json']}[task]


def planned_outputs(images: list[str], names: list[str], task: str = 'semantic') -> list[str]:
    """Every file a run writes (``vis/<name>``, :func:`prediction_files` under ``pred/``, ``/``-separated).

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
            for folder, rel in (('vis', name), *(('pred', f) for f in prediction_files(name, task)))]


def open_output_folder(out_dir: str, images: list[str], names: list[str], inputs: list[str | None],
                       overwrite: bool, task: str = 'semantic'):
    """``(folder, planned)``: the output folder, checked before any work, and the files this run writes there."""
    from ..fileio.output_folder import OutputFolder
    planned = planned_outputs(images, names, task)
    folder = OutputFolder(out_dir, TOOL, overwrite, inputs=[*inputs, *images], flag='--overwrite')
    return folder, planned


def save_image(array: np.ndarray, folder, rel: str) -> None:
    """Write an image atomically into the output folder, in the format its suffix names."""
    suffix = osp.splitext(rel)[1].lower()
    with folder.file(rel) as tmp:
        Image.fromarray(array).save(tmp, format=Image.registered_extensions().get(suffix, 'PNG'))


def write_outputs(folder, name: str, label: np.ndarray, overlay: np.ndarray) -> None:
    """``pred/<name without suffix>.png`` (uint8 label map) and ``vis/<name>`` (the overlay) in the output folder."""
    name = name.replace(os.sep, '/')
    save_image(label.astype(np.uint8), folder, 'pred/' + prediction_name(name))
    save_image(overlay, folder, 'vis/' + name)


def save_json(value, folder, rel: str) -> None:
    """Write ``value`` as JSON atomically into the output folder."""
    with folder.file(rel) as tmp, open(tmp, 'w', encoding='utf-8') as f:
        json.dump(value, f)


def panoptic_png(panoptic: np.ndarray, num_classes: int, num_things: int) -> tuple[np.ndarray, list[dict]]:
    """mmdet's panoptic map (H, W) (``label + (segment + 1) x INSTANCE_OFFSET`` for things, ``label`` for stuff,
    ``num_classes`` void) -> COCO's panoptic PNG (H, W, 3) uint8 and its ``segments_info``, segment ids 1, 2, ...
    in the order of mmdet's ids."""
    from mmdet.evaluation.functional import INSTANCE_OFFSET
    ids, inverse, areas = np.unique(panoptic, return_inverse=True, return_counts=True)
    segment_ids = np.zeros(len(ids), np.int64)
    info = []
    for i, (value, area) in enumerate(zip(ids.tolist(), areas.tolist())):
        label = value % INSTANCE_OFFSET
        if label == num_classes:
            continue
        segment_ids[i] = len(info) + 1
        info.append(dict(id=len(info) + 1, category_id=label, isthing=label < num_things, area=area))
    seg = segment_ids[inverse.reshape(panoptic.shape)]
    png = np.stack([seg % 256, seg // 256 % 256, seg // 65536 % 256], axis=-1).astype(np.uint8)
    return png, info


def instance_json(masks: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> dict:
    """Instance results (masks (K, H, W) bool, labels (K,), scores (K,)) as mmdet's ``DetInferencer`` writes them:
    labels, scores, boxes ``[x1, y1, x2, y2]`` of the masks (zeros for an empty one), COCO RLE masks."""
    import pycocotools.mask as mask_util
    boxes = []
    for mask in masks:
        ys, xs = np.nonzero(mask)
        boxes.append([float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)] if len(xs) else
                     [0.0] * 4)
    rles = [mask_util.encode(np.asfortranarray(m[:, :, None].astype(np.uint8)))[0] for m in masks]
    return dict(labels=[int(v) for v in labels], scores=[float(v) for v in scores], bboxes=boxes,
                masks=[dict(size=[int(v) for v in r['size']], counts=r['counts'].decode()) for r in rles])


def overlay(image: np.ndarray, classes: np.ndarray, palette: np.ndarray, opacity: float) -> np.ndarray:
    """``image`` (H, W, 3) uint8 with ``palette[c]`` blended at ``opacity`` where ``classes`` (H, W) is ``c >= 0``."""
    out = image.astype(np.float32)
    painted = classes >= 0
    out[painted] = (1 - opacity) * out[painted] + opacity * palette[classes[painted]]
    return out.round().astype(np.uint8)


def write_mask_outputs(folder, name: str, task: str, result, image: np.ndarray, palette: np.ndarray,
                       num_things: int, opacity: float = 0.5) -> None:
    """Write one image's panoptic or instance result (module docstring) and its overlay.

    Args:
        result: panoptic: mmdet's panoptic map (H, W); instance: ``(masks (K, H, W) bool, labels (K,), scores (K,))``,
            drawn where the score is at least 0.5, higher scores on top.
        image: (H, W, 3) uint8 RGB; palette: (C + 1, 3), the last row for void (unused).
    """
    from mmdet.evaluation.functional import INSTANCE_OFFSET
    name = name.replace(os.sep, '/')
    stem = 'pred/' + osp.splitext(name)[0]
    num_classes = len(palette) - 1
    if task == 'panoptic':
        png, info = panoptic_png(result, num_classes, num_things)
        save_image(png, folder, stem + '.png')
        save_json(dict(file_name=osp.basename(stem) + '.png', segments_info=info), folder, stem + '.json')
        labels = result % INSTANCE_OFFSET
        classes = np.where(labels == num_classes, -1, labels)
    else:
        masks, labels, scores = result
        save_json(instance_json(masks, labels, scores), folder, stem + '.json')
        classes = np.full(image.shape[:2], -1, np.int64)
        for k in np.argsort(scores, kind='stable'):
            if scores[k] >= 0.5:
                classes[masks[k]] = labels[k]
    save_image(overlay(image, classes, palette, opacity), folder, 'vis/' + name)
