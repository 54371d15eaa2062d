"""Random resized crops decoded from the file's bytes at the smallest JPEG DCT scale that covers the crop.

The draws equal ``LoadImageFromFile -> [ColorJitter ->] RandomFlip -> (TwoView)RandomResizedCrop``'s, so a seed gives
the same box, flip and jitter factors; at decode scale 1 the views equal the exact pipeline's.
"""
from __future__ import annotations

import io
import math

import cv2
import numpy as np
from PIL import Image

from beit_mm.fileio.decode_errors import decode_refusal
from beit_mm.fileio.images import jpeg_header
from beit_mm.registry import TRANSFORMS

from .color_jitter import SampleColorJitter, whole_image_contrast_mean
from .crop import RandomResizedCropBase, pair, random_resized_crop_box

JPEG_DRAFT_SCALES = (8, 4, 2, 1)
EXIF_ORIENTATION = 0x0112
ROTATED_ORIENTATIONS = (5, 6, 7, 8)
# The JPEG frame markers Pillow opens (SOF0-3, 5-7, 9-11, 13-15) and its mode per number of components.
PILLOW_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
PILLOW_JPEG_MODES = {1: 'L', 3: 'RGB', 4: 'CMYK'}
IMREAD_AT_SCALE = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
                   8: cv2.IMREAD_REDUCED_COLOR_8}
PIL_RESAMPLE = dict(nearest=Image.NEAREST, bilinear=Image.BILINEAR, bicubic=Image.BICUBIC, box=Image.BOX,
                    hamming=Image.HAMMING, lanczos=Image.LANCZOS)


def draft_scale(crop_h: int, crop_w: int, out_h: int, out_w: int) -> int:
    """The largest JPEG scale at which a ``crop_h x crop_w`` crop still has ``out_h x out_w`` pixels."""
    for scale in JPEG_DRAFT_SCALES:
        if crop_h >= scale * out_h and crop_w >= scale * out_w:
            return scale
    return 1


def header_layout(data: bytes, source: str = 'the image') -> tuple[int, int, str | None, str | None, int]:
    """``(height, width, format, mode, EXIF orientation)`` of the image in ``data`` (the file ``source``) from its
    header.

    Raises:
        ImageDecodeError: Pillow reads no image in ``data``, naming ``source``.
    """
    header = jpeg_header(data) if data[:3] == b'\xff\xd8\xff' else None  # Pillow's JPEG signature
    if header is not None and not (header.exif or header.mpf) and len(header.frames) == 1:
        marker, precision, height, width, components = header.frames[0]
        if marker in PILLOW_JPEG_FRAMES and precision == 8 and components in PILLOW_JPEG_MODES and height and width:
            return height, width, 'JPEG', PILLOW_JPEG_MODES[components], 1
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        orientation = image.getexif().get(EXIF_ORIENTATION, 1) if image.format == 'JPEG' and 'exif' in image.info else 1
    except Exception as error:  # noqa: BLE001  (Pillow's parsers raise OSError, SyntaxError, ValueError, ...)
        raise decode_refusal(source, 'Pillow', error) from None
    return height, width, image.format, image.mode, orientation


def upright_size(data: bytes, source: str = 'the image') -> tuple[int, int, bool]:
    """``(height, width, is_jpeg)`` of the image in ``data`` (the file ``source``) from its header, after its EXIF
    orientation."""
    height, width, fmt, _, orientation = header_layout(data, source)
    if orientation in ROTATED_ORIENTATIONS:
        height, width = width, height
    return height, width, fmt == 'JPEG'


def decode_region(data: bytes, is_jpeg: bool, box: tuple[int, int, int, int], out_size: tuple[int, int],
                  draft: bool = True, declared: tuple[int, int] | None = None,
                  source: str = 'the image') -> tuple[np.ndarray, Image.Image, tuple[float, float, float, float], int]:
    """Decode ``data`` with OpenCV (upright, BGR), a JPEG at :func:`draft_scale`, and cut the pixels around ``box``.

    Args:
        data, is_jpeg: the file's bytes and whether they may be decoded at a reduced scale.
        box: ``(top, left, height, width)`` in the full-size upright image, to be resized to ``out_size``.
        draft: allow a reduced-scale decode.
        declared: the upright ``(height, width)`` from the header, which the decode must match.
        source: the file, named in the errors.

    Returns:
        ``(whole, region, resize_box, scale)``: the decoded BGR image, a Pillow image of the pixels around the box,
        the box in it as ``(x0, y0, x1, y1)`` floats for ``Image.resize(..., box=)``, and the scale (1, 2, 4 or 8).

    Raises:
        ImageDecodeError: OpenCV cannot decode ``data``.
        ValueError: OpenCV decodes it to another size than ``declared``.
    """
    top, left, h, w = box
    scale = draft_scale(h, w, *out_size) if draft and is_jpeg else 1
    whole = cv2.imdecode(np.frombuffer(data, np.uint8), IMREAD_AT_SCALE[scale])
    if whole is None:
        raise decode_refusal(source, 'OpenCV')
    if declared is not None and whole.shape[:2] != tuple(math.ceil(side / scale) for side in declared):
        raise ValueError(f'{source}: decoded to {whole.shape[0]} x {whole.shape[1]} (at 1/{scale} scale), but its '
                         f'header declared {declared[0]} x {declared[1]}; the crop box was drawn on the declared size, '
                         'so nothing was cropped. Fix: re-encode the file with a standard tool')
    x0, y0, x1, y1 = left / scale, top / scale, (left + w) / scale, (top + h) / scale
    cx0, cy0 = math.floor(x0), math.floor(y0)
    cx1, cy1 = min(math.ceil(x1), whole.shape[1]), min(math.ceil(y1), whole.shape[0])
    region = Image.fromarray(np.ascontiguousarray(whole[cy0:cy1, cx0:cx1]))
    return whole, region, (x0 - cx0, y0 - cy0, x1 - cx0, y1 - cy0), scale


def random_flip(prob: float) -> bool:
    """Whether to flip, drawn as mmcv ``RandomFlip(prob, direction='horizontal')`` draws."""
    return np.random.choice(['horizontal', None], p=[prob, 1. - prob]) is not None


def as_array(view: Image.Image, flip: bool = False) -> np.ndarray:
    """A Pillow image of BGR bytes as a writable (H, W, 3) uint8 array, mirrored left-right if ``flip``."""
    array = np.array(view)
    return array[:, ::-1] if flip else array


@TRANSFORMS.register_module()
class DecodeTwoViewRandomResizedCrop(RandomResizedCropBase):
    """``LoadImageFromFile -> RandomFlip -> TwoViewRandomResizedCrop`` from the file's bytes in one step.

    Sets ``img = [view, tokenizer_view]`` (BGR uint8), ``img_shape``, ``ori_shape``, ``crop_bbox``, ``flip``,
    ``flip_direction``, ``draft_scale``, and the jitter's ``contrast_mean`` after ``SampleColorJitter``.

    Args:
        size, tokenizer_size, scale, ratio, interpolation, tokenizer_interpolation: as ``TwoViewRandomResizedCrop``.
        flip_prob: probability of a horizontal flip, drawn before the crop box.
        draft: decode JPEGs at a reduced DCT scale where the crop allows.
        backend_args: MMEngine file backend arguments.
    """

    filters = tuple(PIL_RESAMPLE)
    fields = ('size', 'tokenizer_size', 'scale', 'ratio', 'interpolation', 'tokenizer_interpolation', 'flip_prob',
              'draft')

    def __init__(self,
                 size: int | tuple[int, int] = 224,
                 tokenizer_size: int | tuple[int, int] = 112,
                 scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bicubic',
                 tokenizer_interpolation: str = 'lanczos',
                 flip_prob: float = 0.5,
                 draft: bool = True,
                 backend_args: dict | None = None) -> None:
        self.scale, self.ratio = self.check(scale, ratio, (interpolation, tokenizer_interpolation), flip_prob,
                                            backend_args)
        self.set_views(size, tokenizer_size, interpolation, tokenizer_interpolation)
        self.draft = draft

    def transform(self, results: dict) -> dict:
        flip = random_flip(self.flip_prob)
        data = self.read(results)
        height, width, is_jpeg = upright_size(data, results['img_path'])
        top, left, h, w = random_resized_crop_box(height, width, self.scale, self.ratio)
        if flip:  # the box was drawn on the flipped image
            left = width - left - w
        largest = (max(self.size[0], self.tokenizer_size[0]), max(self.size[1], self.tokenizer_size[1]))
        whole, region, box, scale = decode_region(data, is_jpeg, (top, left, h, w), largest, self.draft,
                                                  (height, width), results['img_path'])
        jitter = results.get(SampleColorJitter.key)
        if jitter is not None and jitter.get('contrast') is not None:
            jitter['contrast_mean'] = whole_image_contrast_mean(whole, jitter)
        view = region.resize(self.size[::-1], PIL_RESAMPLE[self.interpolation], box=box)
        if (self.tokenizer_size, self.tokenizer_interpolation) == (self.size, self.interpolation):
            tokenizer_view = view
        else:
            tokenizer_view = region.resize(self.tokenizer_size[::-1], PIL_RESAMPLE[self.tokenizer_interpolation],
                                           box=box)
        results['img'] = [as_array(view, flip), as_array(tokenizer_view, flip)]
        results['img_shape'] = self.size
        results['ori_shape'] = (height, width)
        results['crop_bbox'] = (top, width - left - w if flip else left, h, w)
        results['flip'] = flip
        results['flip_direction'] = 'horizontal' if flip else None
        results['draft_scale'] = scale
        return results


@TRANSFORMS.register_module()
class DecodeRandomResizedCrop(RandomResizedCropBase):
    """``LoadImageFromFile -> RandomResizedCrop [-> RandomFlip]`` (mmpretrain's, Pillow) from the file's bytes.

    Sets ``img`` (BGR uint8), ``img_shape``, ``ori_shape``, ``crop_bbox``, ``draft_scale``, and with ``flip_prob``
    ``flip`` and ``flip_direction``.

    Args:
        scale, crop_ratio_range, aspect_ratio_range, interpolation: as mmpretrain's ``RandomResizedCrop``.
        flip_prob: None = no flip and no draw; else the flip probability, drawn after the crop.
        draft: decode JPEGs at a reduced DCT scale where the crop allows.
        backend_args: MMEngine file backend arguments.
    """

    filters = tuple(PIL_RESAMPLE)
    fields = ('scale', 'crop_ratio_range', 'aspect_ratio_range', 'interpolation', 'flip_prob', 'draft')

    def __init__(self,
                 scale: int | tuple[int, int] = 224,
                 crop_ratio_range: tuple[float, float] = (0.08, 1.0),
                 aspect_ratio_range: tuple[float, float] = (3. / 4., 4. / 3.),
                 interpolation: str = 'bilinear',
                 flip_prob: float | None = None,
                 draft: bool = True,
                 backend_args: dict | None = None) -> None:
        self.crop_ratio_range, self.aspect_ratio_range = self.check(crop_ratio_range, aspect_ratio_range,
                                                                    (interpolation,), flip_prob, backend_args,
                                                                    ('crop_ratio_range', 'aspect_ratio_range'))
        self.scale = pair(scale)
        self.interpolation = interpolation
        self.draft = draft

    def transform(self, results: dict) -> dict:
        data = self.read(results)
        height, width, is_jpeg = upright_size(data, results['img_path'])
        box = random_resized_crop_box(height, width, self.crop_ratio_range, self.aspect_ratio_range)
        flip = self.flip_prob is not None and random_flip(self.flip_prob)
        _, region, resize_box, scale = decode_region(data, is_jpeg, box, self.scale, self.draft, (height, width),
                                                     results['img_path'])
        view = region.resize(self.scale[::-1], PIL_RESAMPLE[self.interpolation], box=resize_box)
        results['img'] = as_array(view, flip)
        results['img_shape'] = self.scale
        results['ori_shape'] = (height, width)
        results['crop_bbox'] = box
        results['draft_scale'] = scale
        if self.flip_prob is not None:
            results['flip'] = flip
            results['flip_direction'] = 'horizontal' if flip else None
        return results
