"""Crops and views made on the device from the JPEG bytes the Encoded crops packed: one batched ``decode_jpeg``,
then per image the flip, the crop and Pillow's resizes on tensors."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torchvision.io import ImageReadMode, decode_jpeg

from beit_mm.fileio.decode_errors import decode_refusal

from .pil_resample import apply_tables, resize_tables


def _decode_jpegs(data: list[Tensor], device: torch.device | str, names: Sequence[str]) -> list[Tensor]:
    """torchvision's batched ``decode_jpeg``; when it fails, each JPEG alone, to name the file it cannot read."""
    try:
        return decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError as error:
        for one, name in zip(data, names):
            try:
                decode_jpeg(one, mode=ImageReadMode.RGB, device=device)
            except RuntimeError as own:
                raise decode_refusal(name, 'torchvision', own) from None
        raise decode_refusal(', '.join(names), 'torchvision', error) from None


def decode_images(inputs: Sequence[Tensor], device: torch.device | str,
                  names: Sequence[str] | None = None) -> list[Tensor]:
    """B (3, H_i, W_i) uint8 RGB images on ``device``: JPEG bytes (1-D uint8) decoded in one call, images copied.

    Args:
        inputs: per image, the JPEG bytes or the decoded image.
        device: where the images go (and the JPEGs are decoded).
        names: the files of ``inputs``, named in a decode error (``input <i>`` when not given).

    Raises:
        ValueError: an input that is neither.
        ImageDecodeError: a JPEG torchvision cannot decode, naming its file.
    """
    names = list(names) if names is not None else [f'input {i}' for i in range(len(inputs))]
    encoded = [i for i, t in enumerate(inputs) if t.dim() == 1]
    images: list[Tensor | None] = [None] * len(inputs)
    if encoded:
        decoded = _decode_jpegs([inputs[i].cpu() for i in encoded], device, [names[i] for i in encoded])
        for i, image in zip(encoded, decoded):
            images[i] = image
    for i, t in enumerate(inputs):
        if t.dim() == 3 and t.shape[0] == 3:
            images[i] = t.to(device, non_blocking=True)
        elif t.dim() != 1:
            raise ValueError(f'input {i} has shape {tuple(t.shape)}: expected the JPEG bytes (1-D uint8) or a decoded '
                             '(3, H, W) image, as beit_mm.EncodedTwoViewRandomResizedCrop packs them')
    return images


def decode_declared(inputs, samples: Sequence, device: torch.device | str, transform: str) -> list[Tensor]:
    """:func:`decode_images` of a ``pseudo_collate`` batch, each image checked against its ``sample.ori_shape``.

    Raises:
        ValueError: inputs not per sample, or an image decoded to another size than its header declared.
    """
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, Tensor) for t in inputs):
        raise ValueError(f'encoded images (beit_mm.{transform}) need the per-sample inputs of pseudo_collate: set '
                         "train_dataloader.collate_fn=dict(type='pseudo_collate')")
    images = decode_images(inputs, device, [str(sample.metainfo.get('img_path')) for sample in samples])
    for image, sample in zip(images, samples):
        if tuple(image.shape[1:]) != tuple(sample.ori_shape):
            raise ValueError(f"{sample.metainfo.get('img_path')}: decoded to {tuple(image.shape[1:])}, but its "
                             f'header declared {tuple(sample.ori_shape)}; the crop box was drawn on the declared '
                             'size, so nothing was cropped. Fix: re-encode the file with a standard tool')
    return images


def two_views(images: list[Tensor], crop_bboxes: Sequence[Sequence[int]], flips: Sequence[bool],
              resize: dict) -> tuple[Tensor, Tensor]:
    """``(views, tokenizer_views)`` uint8: each (3, H_i, W_i) image flipped, cropped at its ``(top, left, height,
    width)`` box and resized as ``resize`` (``dict(size, interpolation, tokenizer_size, tokenizer_interpolation)``)."""
    size, tokenizer_size = tuple(resize['size']), tuple(resize['tokenizer_size'])
    same = (size, resize['interpolation']) == (tokenizer_size, resize['tokenizer_interpolation'])
    outputs = [(size, resize['interpolation'])]
    if not same:
        outputs.append((tokenizer_size, resize['tokenizer_interpolation']))
    flipped = [image.flip(-1) if flip else image for image, flip in zip(images, flips)]
    stacked = resized_crops(flipped, crop_bboxes, outputs)
    return stacked[0], stacked[-1]


def resized_crops(images: list[Tensor], crop_bboxes: Sequence[Sequence[int]],
                  outputs: Sequence[tuple[tuple[int, int], str]]) -> list[Tensor]:
    """One (B, 3, h, w) uint8 tensor per ``(size, interpolation)`` of ``outputs``: each crop resized as Pillow does."""
    plans = [[resize_tables((h, w), out, interpolation) for out, interpolation in outputs]
             for _, _, h, w in crop_bboxes]
    tables = _to_device([[table for plan in image_plans for table in plan] for image_plans in plans],
                        images[0].device)
    views: list[list[Tensor]] = [[] for _ in outputs]
    for image, (top, left, h, w), plan, on_device in zip(images, crop_bboxes, plans, tables):
        crop = image[:, top:top + h, left:left + w]
        for k, out in enumerate(plan):
            views[k].append(apply_tables(crop, on_device[:len(out)]))
            on_device = on_device[len(out):]
    return [torch.stack(v) for v in views]


def _to_device(tables: list[list[tuple[int, np.ndarray, np.ndarray]]],
               device: torch.device) -> list[list[tuple[int, Tensor, Tensor]]]:
    """Every image's resize tables copied to ``device`` in one transfer."""
    arrays = [a for image in tables for _, index, weight in image for a in (index, weight)]
    if not arrays:
        return [[] for _ in tables]
    flat = torch.from_numpy(np.concatenate([a.ravel() for a in arrays]))
    if device.type == 'cuda':
        flat = flat.pin_memory()
    flat = flat.to(device, non_blocking=True)
    out, at = [], 0
    for image in tables:
        moved = []
        for dim, index, weight in image:
            parts = []
            for a in (index, weight):
                parts.append(flat[at:at + a.size].view(a.shape))
                at += a.size
            moved.append((dim, *parts))
        out.append(moved)
    return out
