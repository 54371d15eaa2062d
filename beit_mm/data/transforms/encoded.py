"""BEiT's two-view crop and the fine-tuning recipes' random resized crop with the decode left to the data preprocessor:
the worker reads the bytes and makes the draws (those of :mod:`beit_mm.data.transforms.decode`, in its order); the
JPEG is decoded, cropped, resized, flipped (and jittered) on the preprocessor's device.

A file the GPU decoder may not take as the CPU one does (not a JPEG, not 3-channel YCbCr, an EXIF orientation other
than 1) is decoded on the worker instead (OpenCV, as ``LoadImageFromFile``), and its sample carries the whole image.
"""
from __future__ import annotations

import cv2
import numpy as np

from beit_mm.registry import TRANSFORMS

from .crop import RandomResizedCropBase, pair, random_resized_crop_box
from .decode import ROTATED_ORIENTATIONS, header_layout, random_flip
from .pil_resample import FILTERS

# Pillow's mode of a 3-channel YCbCr JPEG (the only kind whose bytes go to the preprocessor).
DECODABLE_MODE = 'RGB'


def encoded_header(data: bytes) -> tuple[int, int, bool]:
    """``(height, width, device_decodable)`` of the image in ``data`` from its header (:func:`header_layout`): the
    upright size (as OpenCV decodes it: a 90-degree EXIF orientation swaps the sides), and whether its bytes may go to
    the device decoder (a 3-channel YCbCr JPEG without an EXIF orientation other than 1)."""
    height, width, fmt, mode, orientation = header_layout(data)
    if orientation in ROTATED_ORIENTATIONS:
        width, height = height, width
    return height, width, fmt == 'JPEG' and mode == DECODABLE_MODE and orientation == 1


def decode_whole(data: bytes) -> np.ndarray:
    """The image in ``data`` decoded by OpenCV (``LoadImageFromFile``'s decoder: upright, 3 channels) as an RGB
    (H, W, 3) uint8 array.

    Raises:
        ValueError: OpenCV cannot decode ``data``.
    """
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError('OpenCV could not decode the image; check the file (a truncated or non-image file)')
    return np.ascontiguousarray(bgr[:, :, ::-1])


@TRANSFORMS.register_module()
class EncodedTwoViewRandomResizedCrop(RandomResizedCropBase):
    """Read ``results['img_path']``'s bytes, draw the flip and BEiT's crop box on the image's declared size, and
    leave the decode, crop, resize and flip to the data preprocessor (``MIMDataPreprocessor``).

    Added keys: ``img`` (the file's bytes as a 1-D uint8 array, or the decoded whole image (H, W, 3) RGB uint8 for
    the files the module docstring lists), ``img_shape`` (of the view), ``ori_shape`` (upright), ``crop_bbox``
    ``(top, left, height, width)`` in the flipped image as ``TwoViewRandomResizedCrop`` reports it, ``flip``,
    ``flip_direction`` and :attr:`key` (``dict(size, interpolation, tokenizer_size, tokenizer_interpolation)``, what
    the preprocessor resizes to). The pack transform must carry :attr:`handover` (and the jitter's key); collate with
    ``pseudo_collate`` (the byte strings differ in length).

    Args:
        size, tokenizer_size, scale, ratio: as ``TwoViewRandomResizedCrop``.
        interpolation, tokenizer_interpolation: 'bicubic' or 'lanczos' (Pillow's filters, applied on the device).
        flip_prob: probability of a horizontal flip (mmcv ``RandomFlip(prob)``'s draw, before the crop box).
        backend_args: MMEngine file backend arguments, as ``LoadImageFromFile``'s.
    """

    key = 'two_view_resize'
    handover = ('crop_bbox', 'flip', 'ori_shape', key)
    filters = tuple(FILTERS)
    filter_hint = ' (the device resize); use beit_mm.DecodeTwoViewRandomResizedCrop for the other Pillow filters'
    fields = ('size', 'tokenizer_size', 'scale', 'ratio', 'interpolation', 'tokenizer_interpolation', 'flip_prob')

    def __init__(self,
                 size: int | tuple[int, int] = 224,
                 tokenizer_size: int | tuple[int, int] = 112,
                 scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bicubic',
                 tokenizer_interpolation: str = 'lanczos',
                 flip_prob: float = 0.5,
                 backend_args: dict | None = None) -> None:
        self.scale, self.ratio = self.check(scale, ratio, (interpolation, tokenizer_interpolation), flip_prob,
                                            backend_args)
        self.set_views(size, tokenizer_size, interpolation, tokenizer_interpolation)

    def transform(self, results: dict) -> dict:
        flip = random_flip(self.flip_prob)
        data = self.read(results)
        height, width, decodable = encoded_header(data)
        top, left, h, w = random_resized_crop_box(height, width, self.scale, self.ratio)
        results['img'] = np.frombuffer(data, np.uint8).copy() if decodable else decode_whole(data)
        results['img_shape'] = self.size
        results['ori_shape'] = (height, width)
        results['crop_bbox'] = (top, left, h, w)
        results['flip'] = flip
        results['flip_direction'] = 'horizontal' if flip else None
        results[self.key] = dict(size=self.size, interpolation=self.interpolation,
                                 tokenizer_size=self.tokenizer_size,
                                 tokenizer_interpolation=self.tokenizer_interpolation)
        return results


@TRANSFORMS.register_module()
class EncodedRandomResizedCrop(RandomResizedCropBase):
    """``LoadImageFromFile -> RandomResizedCrop -> RandomFlip`` (mmpretrain's, Pillow backend) with the decode left to
    the data preprocessor (``AugmentClsDataPreprocessor``): read ``results['img_path']``'s bytes, draw mmpretrain's
    crop box on the image's declared size, then mmcv ``RandomFlip``'s flip; the preprocessor decodes, crops, resizes
    (Pillow's filters on tensors) and flips on its device.

    Added keys: ``img`` (the bytes, or the whole image decoded on the worker for the files the module docstring
    lists), ``img_shape`` (of the crop), ``ori_shape`` (upright), ``crop_bbox`` ``(top, left, height, width)``,
    ``flip``, ``flip_direction``, :attr:`key` (``dict(size, interpolation)``). The pack transform must carry
    :attr:`handover`; collate with ``pseudo_collate``.

    Args:
        scale, crop_ratio_range, aspect_ratio_range: as mmpretrain's ``RandomResizedCrop`` (``scale`` is the output
            size).
        interpolation: 'bicubic' or 'lanczos' (Pillow's filters, applied on the device).
        flip_prob: probability of a horizontal flip (``RandomFlip(prob)``'s draw, after the crop box, as the exact
            pipeline orders them).
        backend_args: MMEngine file backend arguments, as ``LoadImageFromFile``'s.
    """

    key = 'crop_resize'
    handover = ('crop_bbox', 'flip', 'ori_shape', key)
    filters = tuple(FILTERS)
    filter_hint = ' (the device resize); use beit_mm.DecodeRandomResizedCrop for the other Pillow filters'
    fields = ('scale', 'crop_ratio_range', 'aspect_ratio_range', 'interpolation', 'flip_prob')

    def __init__(self,
                 scale: int | tuple[int, int] = 224,
                 crop_ratio_range: tuple[float, float] = (0.08, 1.0),
                 aspect_ratio_range: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bicubic',
                 flip_prob: float = 0.5,
                 backend_args: dict | None = None) -> None:
        self.crop_ratio_range, self.aspect_ratio_range = self.check(
            crop_ratio_range, aspect_ratio_range, (interpolation,), flip_prob, backend_args,
            ('crop_ratio_range', 'aspect_ratio_range'))
        self.scale = pair(scale)
        self.interpolation = interpolation

    def transform(self, results: dict) -> dict:
        data = self.read(results)
        height, width, decodable = encoded_header(data)
        box = random_resized_crop_box(height, width, self.crop_ratio_range, self.aspect_ratio_range)
        flip = random_flip(self.flip_prob)
        results['img'] = np.frombuffer(data, np.uint8).copy() if decodable else decode_whole(data)
        results['img_shape'] = self.scale
        results['ori_shape'] = (height, width)
        results['crop_bbox'] = box
        results['flip'] = flip
        results['flip_direction'] = 'horizontal' if flip else None
        results[self.key] = dict(size=self.scale, interpolation=self.interpolation)
        return results
