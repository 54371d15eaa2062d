"""One pixel limit for every image decoder: an image's size is read from its header and bounded before any decoder
allocates its pixels.

Pillow refuses images over ``PIL.Image.MAX_IMAGE_PIXELS`` (a decompression bomb: a few KB of PNG or JPEG that declare
gigapixels), but OpenCV, MMCV's default ``imdecode_backend='cv2'``, decodes up to 2**30 pixels (12 GB for a
3-channel float copy downstream), and turbojpeg/tifffile have no limit. So the file room reads the width and height
from the header (Pillow's format parsers, without decoding: :func:`image_header`) and refuses an image over
:func:`max_image_pixels` in the one place every decoder's bytes pass: :class:`.inputs.InputLocalBackend.get` (MMCV's
``LoadImageFromFile``, mmseg's ``LoadAnnotations``), and :func:`.inputs.open_image` for beit_mm's own readers.

The limit is Pillow's (89,478,485 pixels, about 9459 x 9459). To read larger images on purpose, set
``BEIT_MM_MAX_IMAGE_PIXELS`` (pixels) in the environment: it applies to every decoder, Pillow's own limit included.
"""
from __future__ import annotations

import io
import os
import struct
from typing import BinaryIO

from PIL import Image

#: The environment variable that sets the limit (pixels, a positive integer).
LIMIT_VARIABLE = 'BEIT_MM_MAX_IMAGE_PIXELS'
#: The header parsers tried, each after its own magic-bytes test: the formats MMCV's decoders read.
HEADER_FORMATS = ('PNG', 'JPEG', 'BMP', 'TIFF', 'WEBP', 'GIF', 'PPM', 'JPEG2000')


class ImageTooLargeError(ValueError):
    """An image whose header declares more pixels than :func:`max_image_pixels`; the message names the file, its
    size, the limit and how to raise it."""


_PILLOW_DEFAULT = Image.MAX_IMAGE_PIXELS


def max_image_pixels() -> int:
    """The pixel limit: ``$BEIT_MM_MAX_IMAGE_PIXELS`` when set, else Pillow's default (89,478,485).

    Raises:
        ValueError: the variable is set but not a positive integer.
    """
    text = os.environ.get(LIMIT_VARIABLE)
    if text is None:
        return _PILLOW_DEFAULT
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f'{LIMIT_VARIABLE}={text!r} is not a positive number of pixels. Fix: e.g. '
                         f'{LIMIT_VARIABLE}={4 * _PILLOW_DEFAULT}, or unset it for the default {_PILLOW_DEFAULT}')
    return value


def apply_pixel_limit() -> None:
    """Set Pillow's own limit to :func:`max_image_pixels`, so Pillow agrees with the check of every other decoder (on
    ``import beit_mm``; Pillow refuses at twice its limit, after a warning at once)."""
    Image.MAX_IMAGE_PIXELS = max_image_pixels()


def image_header(data: bytes | BinaryIO) -> tuple[str, int, int] | None:
    """``(format, width, height)`` from the header of the image in ``data`` (bytes, or a seekable binary file read
    from its start as far as the header): Pillow's parser of that format, as ``Image.open`` runs it but without its
    decompression-bomb check, and no pixel decoded. None when ``data`` is none of :data:`HEADER_FORMATS`."""
    fp = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    Image.init()
    fp.seek(0)
    prefix = fp.read(16)
    for fmt in HEADER_FORMATS:
        factory, accept = Image.OPEN.get(fmt, (None, None))
        if factory is None or (accept is not None and not accept(prefix)):
            continue
        fp.seek(0)
        try:
            image = factory(fp, '')
        except (SyntaxError, IndexError, TypeError, ValueError, OSError, struct.error, EOFError):
            continue
        return fmt, image.size[0], image.size[1]
    return None


def _refuse(source: str, fmt: str, width: int, height: int, limit: int) -> ImageTooLargeError:
    return ImageTooLargeError(
        f'image {source} declares {width} x {height} = {width * height} pixels ({fmt}), more than the limit of '
        f'{limit} pixels: a decompression bomb, or a larger image than beit_mm reads by default; nothing was '
        f'decoded. Fix: resize it, or, if you mean to read it, raise the limit for every decoder with '
        f'{LIMIT_VARIABLE}={width * height} in the environment')


def check_image_bytes(data: bytes | BinaryIO, source: str) -> tuple[str, int, int] | None:
    """The header of the image in ``data`` (read from ``source``; :func:`image_header`), refused when it declares more
    than :func:`max_image_pixels`; bytes that are no image of :data:`HEADER_FORMATS` pass (annotation files, ...)
    and give None.

    Raises:
        ImageTooLargeError: naming ``source``, its size, the limit and how to raise it.
    """
    header = image_header(data)
    if header is not None:
        fmt, width, height = header
        limit = max_image_pixels()
        if width * height > limit:
            raise _refuse(source, fmt, width, height, limit)
    return header
