"""The inputs and outputs of segmenting image files and folders: the input images, checked from their headers; their
names under ``vis/`` and ``pred/``; the output folder; the label maps and overlays, each written atomically.
"""
from __future__ import annotations

import os
import os.path as osp

import numpy as np
from PIL import Image

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
TOOL = 'tools/infer.py'


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
    """``(folder, planned)``: the output folder, checked before any work, and the files this run writes there."""
    from ..fileio.output_folder import OutputFolder
    planned = planned_outputs(images, names)
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
