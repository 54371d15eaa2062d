"""Random resized crops whose decode is left to the data preprocessor: the worker reads the bytes and makes the draws.

A file the device decoder may read differently (not a 3-channel YCbCr JPEG, or EXIF-rotated) is decoded on the worker.
"""
from __future__ import annotations

import cv2
import numpy as np

from beit_mm.fileio.decode_errors import decode_refusal
from beit_mm.registry import TRANSFORMS

from .crop import RandomResizedCropBase, pair, random_resized_crop_box
from .decode import ROTATED_ORIENTATIONS, header_layout, random_flip
from .pil_resample import FILTERS

DECODABLE_MODE = 'RGB'


def encoded_header(data: bytes, source: str) -> tuple[int, int, bool]:
    """``(height, width, device_decodable)`` of the image in ``data`` (the file ``source``) from its header,
    upright."""
    height, width, fmt, mode, orientation = header_layout(data, source)
    if orientation in ROTATED_ORIENTATIONS:
        width, height = height, width
    return height, width, fmt == 'JPEG' and mode == DECODABLE_MODE and orientation == 1


def decode_whole(data: bytes, source: str) -> np.ndarray:
    """The image in ``data`` (the file ``source``) decoded by OpenCV as an upright (H, W, 3) uint8 RGB array;
    ImageDecodeError if it cannot."""
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise decode_refusal(source, 'OpenCV')
    return np.ascontiguousarray(bgr[:, :, ::-1])


@TRANSFORMS.register_module()
class EncodedTwoViewRandomResizedCrop(RandomResizedCropBase):
    """Draws the flip and BEiT's crop box; the preprocessor decodes, crops, resizes and flips.

    Sets ``img`` (the bytes as 1-D uint8, or the whole RGB image), ``img_shape``, ``ori_shape``, ``crop_bbox``,
    ``flip``, ``flip_direction`` and :attr:`key`. The pack transform must carry :attr:`handover`; collate with
    ``pseudo_collate``.

    Args:
        size, tokenizer_size, scale, ratio: as ``TwoViewRandomResizedCrop``.
        interpolation, tokenizer_interpolation: 'bicubic' or 'lanczos'.
        flip_prob: probability of a horizontal flip, drawn before the crop box.
        backend_args: MMEngine file backend arguments.
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
        height, width, decodable = encoded_header(data, results['img_path'])
        top, left, h, w = random_resized_crop_box(height, width, self.scale, self.ratio)
        results['img'] = np.frombuffer(data, np.uint8).copy() if decodable else decode_whole(data, results['img_path'])
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
    """``LoadImageFromFile -> RandomResizedCrop -> RandomFlip`` (mmpretrain's, Pillow) with the decode on the device.

    Sets the keys :class:`EncodedTwoViewRandomResizedCrop` sets, :attr:`key` holding ``dict(size, interpolation)``.

    Args:
        scale, crop_ratio_range, aspect_ratio_range: as mmpretrain's ``RandomResizedCrop``.
        interpolation: 'bicubic' or 'lanczos'.
        flip_prob: probability of a horizontal flip, drawn after the crop box.
        backend_args: MMEngine file backend arguments.
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
        height, width, decodable = encoded_header(data, results['img_path'])
        box = random_resized_crop_box(height, width, self.crop_ratio_range, self.aspect_ratio_range)
        flip = random_flip(self.flip_prob)
        results['img'] = np.frombuffer(data, np.uint8).copy() if decodable else decode_whole(data, results['img_path'])
        results['img_shape'] = self.scale
        results['ori_shape'] = (height, width)
        results['crop_bbox'] = box
        results['flip'] = flip
        results['flip_direction'] = 'horizontal' if flip else None
        results[self.key] = dict(size=self.scale, interpolation=self.interpolation)
        return results
