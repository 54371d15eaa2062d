"""BEiT's crops from the file's bytes: the box drawn on the JPEG's declared size, the JPEG decoded at the smallest DCT
scale that still covers the crop at the output size, ColorJitter left to the data preprocessor.

``SampleColorJitter -> DecodeTwoViewRandomResizedCrop(flip_prob=0.5)`` makes the exact pipeline's draws
(``LoadImageFromFile -> ColorJitter -> RandomFlip -> TwoViewRandomResizedCrop``) in its order from NumPy's global RNG,
so a seed gives the same box, flip and jitter factors. What differs: a crop at least 2x the output in both directions
is resampled from a JPEG decoded at 1/2, 1/4 or 1/8 scale (OpenCV's ``IMREAD_REDUCED_COLOR_*``; at scale 1 the views
are the exact pipeline's); the jitter acts on the resized views, so it commutes with the resize only up to Pillow's
roundings; the contrast grey comes from the whole image resized to at most 128 pixels a side.
``DecodeRandomResizedCrop`` does the same for ``LoadImageFromFile -> RandomResizedCrop -> RandomFlip``.
"""
from __future__ import annotations

import io
import math

import cv2
import numpy as np
from PIL import Image

from beit_mm.fileio.images import jpeg_header
from beit_mm.registry import TRANSFORMS

from .color_jitter import SampleColorJitter, whole_image_contrast_mean
from .crop import RandomResizedCropBase, pair, random_resized_crop_box

# libjpeg's DCT scalings that Pillow's draft asks for (1/8 ... 1/1), largest first.
JPEG_DRAFT_SCALES = (8, 4, 2, 1)
# EXIF tag of the orientation (OpenCV applies it when decoding, as the exact pipeline's LoadImageFromFile does), and
# its values that turn the image by 90 degrees.
EXIF_ORIENTATION = 0x0112
ROTATED_ORIENTATIONS = (5, 6, 7, 8)
# The JPEG frame markers Pillow opens (JpegImagePlugin's SOF handlers: SOF0-3, 5-7, 9-11, 13-15) and its mode for
# each number of components.
PILLOW_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
PILLOW_JPEG_MODES = {1: 'L', 3: 'RGB', 4: 'CMYK'}
# OpenCV's decode flag at each JPEG scale (IMREAD_COLOR: LoadImageFromFile's color_type='color').
IMREAD_AT_SCALE = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
                   8: cv2.IMREAD_REDUCED_COLOR_8}
PIL_RESAMPLE = dict(nearest=Image.NEAREST, bilinear=Image.BILINEAR, bicubic=Image.BICUBIC, box=Image.BOX,
                    hamming=Image.HAMMING, lanczos=Image.LANCZOS)


def draft_scale(crop_h: int, crop_w: int, out_h: int, out_w: int) -> int:
    """The largest of :data:`JPEG_DRAFT_SCALES` at which a ``crop_h x crop_w`` crop still has at least
    ``out_h x out_w`` pixels (the output is never upsampled from a reduced decode)."""
    for scale in JPEG_DRAFT_SCALES:
        if crop_h >= scale * out_h and crop_w >= scale * out_w:
            return scale
    return 1


def header_layout(data: bytes) -> tuple[int, int, str | None, str | None, int]:
    """``(height, width, format, mode, EXIF orientation)`` of the image in ``data`` as Pillow's ``Image.open`` reads
    its header (the size before the orientation; 1 without one), nothing decoded. A plain 8-bit JPEG is read by the
    file room's marker scan (:func:`beit_mm.fileio.images.jpeg_header`, which, as libjpeg, skips stray bytes between
    segments), every other file by Pillow.

    Raises:
        PIL.UnidentifiedImageError: Pillow reads no image in ``data``.
    """
    header = jpeg_header(data) if data[:3] == b'\xff\xd8\xff' else None  # Pillow's JPEG signature
    if header is not None and not (header.exif or header.mpf) and len(header.frames) == 1:
        marker, precision, height, width, components = header.frames[0]
        if marker in PILLOW_JPEG_FRAMES and precision == 8 and components in PILLOW_JPEG_MODES and height and width:
            return height, width, 'JPEG', PILLOW_JPEG_MODES[components], 1
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    orientation = image.getexif().get(EXIF_ORIENTATION, 1) if image.format == 'JPEG' and 'exif' in image.info else 1
    return height, width, image.format, image.mode, orientation


def upright_size(data: bytes) -> tuple[int, int, bool]:
    """``(height, width, is_jpeg)`` of the image in ``data`` from its header (:func:`header_layout`), after its EXIF
    orientation (as OpenCV decodes it: a 90-degree orientation swaps the sides)."""
    height, width, fmt, _, orientation = header_layout(data)
    if orientation in ROTATED_ORIENTATIONS:
        height, width = width, height
    return height, width, fmt == 'JPEG'


def decode_region(data: bytes, is_jpeg: bool, box: tuple[int, int, int, int], out_size: tuple[int, int],
                  draft: bool = True, declared: tuple[int, int] | None = None,
                  source: str = 'the image') -> tuple[np.ndarray, Image.Image, tuple[float, float, float, float], int]:
    """Decode the image in ``data`` with OpenCV (``LoadImageFromFile``'s decoder: upright, BGR), a JPEG at the
    smallest DCT scale whose pixels still cover ``box`` at ``out_size`` (:func:`draft_scale`; OpenCV's
    ``IMREAD_REDUCED_COLOR_{2,4,8}``, libjpeg's scaled IDCT), and cut the pixels of ``box``.

    Args:
        data: the file's bytes.
        is_jpeg: from :func:`upright_size`; other formats are decoded at full size.
        box: ``(top, left, height, width)`` in the full-size upright image.
        out_size: ``(height, width)`` the region will be resized to.
        draft: allow a reduced-scale decode.
        declared: the upright ``(height, width)`` from the header, on which ``box`` was drawn: the decoded image
            must have it (at a reduced scale, libjpeg's ``ceil(side / scale)``).
        source: the file, named in the errors.

    Returns:
        ``(whole, region, resize_box, scale)``: the whole decoded BGR image, its pixels around the box (a Pillow image
        of the BGR bytes: Pillow's resampling treats the bands alike), the box in them (``(x0, y0, x1, y1)`` floats,
        for ``Image.resize(..., box=)``), and the scale (1, 2, 4 or 8). At scale 1 the region is exactly the box:
        the crop the exact pipeline resizes.

    Raises:
        ValueError: OpenCV cannot decode ``data``, or decodes it to another size than ``declared``.
    """
    top, left, h, w = box
    scale = draft_scale(h, w, *out_size) if draft and is_jpeg else 1
    whole = cv2.imdecode(np.frombuffer(data, np.uint8), IMREAD_AT_SCALE[scale])
    if whole is None:
        raise ValueError(f'OpenCV could not decode {source}; check the file (a truncated or non-image file)')
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
    """mmcv ``RandomFlip(prob, direction='horizontal')``'s draw (``_choose_direction``: one ``np.random.choice``
    over ``[direction, None]``): whether to flip."""
    return np.random.choice(['horizontal', None], p=[prob, 1. - prob]) is not None


def as_array(view: Image.Image, flip: bool = False) -> np.ndarray:
    """A Pillow image of BGR bytes as a writable (H, W, 3) uint8 array, mirrored left-right if ``flip``."""
    array = np.array(view)
    return array[:, ::-1] if flip else array


@TRANSFORMS.register_module()
class DecodeTwoViewRandomResizedCrop(RandomResizedCropBase):
    """Read ``results['img_path']``, flip with ``flip_prob``, draw BEiT's crop box on the image's declared size,
    decode at the smallest JPEG scale that covers the crop at ``size``, resize the crop to the backbone and tokenizer
    views (Pillow, the source's interpolations): ``results['img'] = [view, tokenizer_view]`` BGR uint8, as
    ``LoadImageFromFile -> RandomFlip -> TwoViewRandomResizedCrop`` give (module docstring: what differs).

    Added keys: ``img`` (list), ``img_shape`` (of the view), ``ori_shape``, ``crop_bbox`` ``(top, left, height,
    width)`` in the (flipped) image as ``TwoViewRandomResizedCrop`` reports it, ``flip``, ``flip_direction``,
    ``draft_scale``; the jitter's ``contrast_mean`` when ``SampleColorJitter`` ran before.

    Args:
        size, tokenizer_size, scale, ratio, interpolation, tokenizer_interpolation: as ``TwoViewRandomResizedCrop``
            (Pillow resampling).
        flip_prob: probability of a horizontal flip (mmcv ``RandomFlip(prob)``'s draw, before the crop box).
        draft: decode JPEGs at a reduced DCT scale where the crop allows; False: always at full size.
        backend_args: MMEngine file backend arguments, as ``LoadImageFromFile``'s.
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
        height, width, is_jpeg = upright_size(data)
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
    """``LoadImageFromFile -> RandomResizedCrop [-> RandomFlip]`` (mmpretrain's, Pillow backend; mmcv's flip) in
    one step from the file's bytes: the crop box drawn on the image's declared size with mmpretrain's draws, then (with
    ``flip_prob``) ``RandomFlip``'s one draw, the JPEG decoded at the smallest scale that covers the crop at ``scale``
    (:func:`decode_region`), the crop resized by Pillow and mirrored. ``results['img']`` BGR uint8
    ``(scale, scale, 3)``; at decode scale 1 equal to the transforms' output (the module docstring says what a
    reduced scale changes).

    Added keys: ``img``, ``img_shape``, ``ori_shape``, ``crop_bbox`` ``(top, left, height, width)``, ``draft_scale``;
    ``flip`` and ``flip_direction`` with ``flip_prob``.

    Args:
        scale, crop_ratio_range, aspect_ratio_range, interpolation: as mmpretrain's ``RandomResizedCrop`` (``scale``
            is the output size).
        flip_prob: None: no flip (no draw); else the probability of a horizontal flip, drawn as
            ``RandomFlip(prob=flip_prob, direction='horizontal')`` right after the crop draws.
        draft: decode JPEGs at a reduced DCT scale where the crop allows.
        backend_args: MMEngine file backend arguments, as ``LoadImageFromFile``'s.
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
        height, width, is_jpeg = upright_size(data)
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
