"""One pixel limit for every image decoder: an image's size is read from its header and bounded before any decoder
sees the bytes; bytes that begin like an image but whose size cannot be read are refused (fail closed).

The decoders that have a limit of their own are given the same one (:func:`apply_pixel_limit`: OpenCV's
``OPENCV_IO_MAX_IMAGE_PIXELS``, Pillow's ``MAX_IMAGE_PIXELS`` set so that its error falls at the limit); for the
others (turbojpeg, tifffile) :func:`image_header` reads sizes with parsers that refuse whatever two decoders could read
differently (a size tag given twice, a Netpbm size token that is not plain digits, a GIF frame outside its screen).
A JPEG's scans are counted too: each scan is a pass over the whole image (:data:`MAX_JPEG_SCANS`). The limit is
Pillow's (89,478,485 pixels); ``BEIT_MM_MAX_IMAGE_PIXELS`` raises it.
"""
from __future__ import annotations

import io
import os
import re
import struct
import warnings
from dataclasses import dataclass
from typing import BinaryIO

from PIL import Image

#: The environment variable that sets the limit (pixels, a positive integer).
LIMIT_VARIABLE = 'BEIT_MM_MAX_IMAGE_PIXELS'
#: The most pages of a TIFF file whose sizes are read (tifffile reads every page of a series).
MAX_TIFF_PAGES = 1024
#: The most scans (SOS markers) of a JPEG file. Every scan is a pass over all the image's coefficients: a baseline
#: JPEG has 1 scan per image, libjpeg's and mozjpeg's progressive scripts 10 and fewer than 20, an MPO two images of
#: those; 2000 scans of a few bytes each make a 66 KB file decode for seconds.
MAX_JPEG_SCANS = 100
#: The environment variable OpenCV reads its pixel limit from, once, when ``cv2`` is imported.
OPENCV_LIMIT_VARIABLE = 'OPENCV_IO_MAX_IMAGE_PIXELS'


class ImageTooLargeError(ValueError):
    """An image whose header declares more pixels than :func:`max_image_pixels`."""


class ImageHeaderError(ValueError):
    """Bytes that begin like an image some decoder reads, whose size cannot be read from its header."""


class ImageWorkError(ValueError):
    """An image whose decoding would cost more work than its pixels explain (a JPEG of too many scans)."""


class _Unreadable(Exception):
    """A header parser's refusal (the reason); turned into :class:`ImageHeaderError` with the file's name."""


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
    """Give the decoders that have a pixel limit :func:`max_image_pixels`: OpenCV's ``$OPENCV_IO_MAX_IMAGE_PIXELS``,
    and Pillow's ``Image.MAX_IMAGE_PIXELS`` at half of it, since Pillow raises ``DecompressionBombError`` only past
    twice its setting (between the two it warns; that warning is silenced, the error does not depend on filters).

    OpenCV reads its variable once, when ``cv2`` is imported: this must run before (``import beit_mm`` does, and
    imports no ``cv2``); in a process that imported ``cv2`` first, OpenCV keeps the limit it read.
    """
    limit = max_image_pixels()
    Image.MAX_IMAGE_PIXELS = (limit + 1) // 2
    os.environ[OPENCV_LIMIT_VARIABLE] = str(limit)
    warnings.filterwarnings('ignore', category=Image.DecompressionBombWarning)


def _unpack(fmt: str, data: bytes, offset: int) -> tuple:
    if offset < 0 or offset + struct.calcsize(fmt) > len(data):
        raise _Unreadable('the header ends before its size')
    return struct.unpack_from(fmt, data, offset)


def _png(data: bytes) -> tuple[int, int, int]:
    # libpng needs IHDR first; CRCs are not checked here (libpng only warns about an ancillary chunk's)
    if data[12:16] != b'IHDR':
        raise _Unreadable('no IHDR chunk first')
    width, height = _unpack('>II', data, 16)
    return width, height, width * height


#: JPEG frame markers (SOF0..SOF15 but DHT, JPG, DAC; SOF55 of JPEG-LS): height and width follow the precision byte.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC} | {0xF7}


def _jpeg_markers(data: bytes):
    """``(marker, offset after it)`` of each marker of libjpeg's scan from SOI through the first SOS or EOI: garbage
    before a marker and fill bytes skipped, each segment's length followed (every step moves forward)."""
    pos, end = 2, len(data)
    while pos < end:
        pos = data.find(b'\xff', pos)
        if pos < 0:
            return
        while pos < end and data[pos] == 0xFF:
            pos += 1
        if pos >= end:
            return
        marker = data[pos]
        pos += 1
        yield marker, pos
        if marker in (0xD9, 0xDA):  # end of image, or scan data
            return
        if marker in (0x00, 0x01) or 0xD0 <= marker <= 0xD8:  # stuffed byte, TEM, RSTn, SOI: no length
            continue
        length, = _unpack('>H', data, pos)
        if length < 2:
            raise _Unreadable(f'a marker segment of length {length}')
        pos += length


def _jpeg(data: bytes) -> tuple[int, int, int]:
    # the first frame header counts
    for marker, pos in _jpeg_markers(data):
        if marker in _JPEG_SOF:
            height, width = _unpack('>HH', data, pos + 3)
            return width, height, width * height
    raise _Unreadable('no frame header (SOFn) before the scan data')


#: A marker: 0xFF (fill bytes before it skipped) and a code that is no stuffed zero, RSTn or fill.
_JPEG_MARKER = re.compile(rb'\xff[^\x00\xd0-\xd7\xff]')


def jpeg_scans(data: bytes, stop: int = MAX_JPEG_SCANS + 1) -> int:
    """The number of scans (SOS markers) of every JPEG image in ``data`` (an MPO's too), counted up to ``stop``:
    segments with a length skipped, scan data searched for the next marker, nothing decoded."""
    scans, pos = 0, 2
    while scans < stop:
        found = _JPEG_MARKER.search(data, pos)
        if found is None:
            break
        marker, pos = data[found.end() - 1], found.end()
        if marker in (0xD8, 0xD9, 0x01):  # SOI, EOI, TEM: no length
            continue
        if pos + 2 > len(data):
            break
        pos += int.from_bytes(data[pos:pos + 2], 'big')
        scans += marker == 0xDA
    return scans


@dataclass(frozen=True)
class JpegHeader:
    """What a JPEG's markers before its first scan say: ``frames`` the (marker, precision, height, width,
    components) of each frame header (SOFn), and whether an APP1 ``Exif`` or an APP2 ``MPF`` segment is among
    them."""
    frames: tuple[tuple[int, int, int, int, int], ...]
    exif: bool
    mpf: bool


def jpeg_header(data: bytes) -> JpegHeader | None:
    """The markers of the JPEG in ``data`` (SOI first) through its first scan, nothing decoded; None when ``data`` is
    no JPEG or its header cannot be read (a segment's length runs out of the data)."""
    if not data.startswith(b'\xff\xd8'):
        return None
    frames, exif, mpf = [], False, False
    try:
        for marker, pos in _jpeg_markers(data):
            if marker in _JPEG_SOF:
                frames.append((marker, *_unpack('>BHHB', data, pos + 2)))
            elif marker == 0xE1:
                exif = exif or data[pos + 2:pos + 8] == b'Exif\0\0'
            elif marker == 0xE2:
                mpf = mpf or data[pos + 2:pos + 6] == b'MPF\0'
    except _Unreadable:
        return None
    return JpegHeader(tuple(frames), exif, mpf)


def _tiff(data: bytes) -> tuple[int, int, int]:
    order = '<' if data[:2] == b'II' else '>'
    version, = _unpack(order + 'H', data, 2)
    big = version == 43
    offset, = _unpack(order + ('Q' if big else 'I'), data, 8 if big else 4)
    count_fmt, entry_size, value_at = (order + 'Q', 20, 12) if big else (order + 'H', 12, 8)
    first, total, seen = None, 0, set()
    while offset:
        if offset in seen or len(seen) >= MAX_TIFF_PAGES:
            raise _Unreadable(f'more than {MAX_TIFF_PAGES} pages, or pages that loop')
        seen.add(offset)
        count, = _unpack(count_fmt, data, offset)
        start = offset + struct.calcsize(count_fmt)
        if start + count * entry_size > len(data):
            raise _Unreadable('a page directory beyond the file')
        size = {}
        for i in range(count):
            at = start + i * entry_size
            tag, kind = _unpack(order + 'HH', data, at)
            if tag in (256, 257):  # ImageWidth, ImageLength: SHORT, LONG or LONG8
                fmt = {3: 'H', 4: 'I', 16: 'Q'}.get(kind)
                if fmt is None:
                    raise _Unreadable(f'tag {tag} of type {kind}')
                if tag in size:  # libtiff keeps the first, other readers the last
                    raise _Unreadable(f'tag {tag} given twice in one page')
                size[tag], = _unpack(order + fmt, data, at + value_at)
        if 256 not in size or 257 not in size:
            raise _Unreadable('a page without ImageWidth/ImageLength')
        first = first or (size[256], size[257])
        total += size[256] * size[257]
        offset, = _unpack(order + ('Q' if big else 'I'), data, start + count * entry_size)
    if first is None:
        raise _Unreadable('no page')
    return first[0], first[1], total


def _webp(data: bytes) -> tuple[int, int, int]:
    chunk = data[12:16]
    if chunk == b'VP8X':  # the canvas: 24-bit width - 1, height - 1
        width = int.from_bytes(_unpack('3s', data, 24)[0], 'little') + 1
        height = int.from_bytes(_unpack('3s', data, 27)[0], 'little') + 1
    elif chunk == b'VP8 ':  # key frame: 3-byte tag, start code, 14-bit width and height
        width, height = (v & 0x3FFF for v in _unpack('<HH', data, 26))
    elif chunk == b'VP8L':  # signature 0x2f, then 14-bit width - 1, height - 1
        bits, = _unpack('<I', data, 21)
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    else:
        raise _Unreadable(f'first chunk {chunk!r}')
    return width, height, width * height


def _bmp(data: bytes) -> tuple[int, int, int]:
    header, = _unpack('<I', data, 14)
    width, height = _unpack('<HH', data, 18) if header == 12 else _unpack('<ii', data, 18)
    width, height = abs(width), abs(height)  # a negative height is a top-down bitmap
    return width, height, width * height


def _gif_blocks(data: bytes, pos: int) -> int:
    """The offset after the data sub-blocks that start at ``pos`` (each a length byte, a zero length ends them)."""
    while True:
        length, = _unpack('B', data, pos)
        pos += 1 + length
        if length == 0:
            return pos


def _gif(data: bytes) -> tuple[int, int, int]:
    # every frame must lie inside the logical screen: Pillow grows its canvas to a frame outside it
    width, height, flags = _unpack('<HHB', data, 6)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while pos < len(data):
        block = data[pos]
        if block == 0x2C:  # image descriptor: left, top, width, height, flags; a local color table; LZW data
            left, top, frame_w, frame_h, frame_flags = _unpack('<HHHHB', data, pos + 1)
            if left + frame_w > width or top + frame_h > height:
                raise _Unreadable(f'a frame of {frame_w} x {frame_h} at ({left}, {top}), outside its screen of '
                                  f'{width} x {height}')
            pos += 10 + (3 << ((frame_flags & 7) + 1) if frame_flags & 0x80 else 0)
            pos = _gif_blocks(data, pos + 1)  # after the LZW code size
        elif block == 0x21:  # extension: label, then sub-blocks
            pos = _gif_blocks(data, pos + 2)
        else:  # the trailer (0x3B), or bytes no decoder reads further
            break
    return width, height, width * height


#: The most digits of a Netpbm size: Pillow reads at most 10 characters, OpenCV any number of leading zeros.
_NETPBM_DIGITS = 10


def _tokens(data: bytes, start: int, count: int) -> list[bytes]:
    """``count`` whitespace-separated tokens of a Netpbm header from ``start``, ``#`` comments (to the end of the
    line: CR or LF) skipped where a token may start; each token plain digits followed by whitespace."""
    tokens, pos = [], start
    while len(tokens) < count:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if pos >= len(data):
            raise _Unreadable('the header ends before its size')
        if data[pos:pos + 1] == b'#':
            ends = [at for at in (data.find(b'\n', pos), data.find(b'\r', pos)) if at >= 0]
            pos = min(ends) if ends else len(data)
            continue
        end = pos
        while end < len(data) and not data[end:end + 1].isspace() and end - pos <= _NETPBM_DIGITS:
            end += 1
        tokens.append(_digits(data[pos:end]))
        pos = end
    return tokens


def _digits(token: bytes) -> bytes:
    # Pillow joins a token across a comment and stops at 10 characters; OpenCV ends it at the first non-digit
    if not token.isdigit() or len(token) > _NETPBM_DIGITS:
        raise _Unreadable(f'size {token[:16]!r} is not a number of at most {_NETPBM_DIGITS} digits followed by a '
                          'space (decoders read such a token differently)')
    return token


def _int(token: bytes) -> int:
    if not token.lstrip(b'-+').isdigit():
        raise _Unreadable(f'size {token[:16]!r} is not a number')
    return abs(int(token))


def _netpbm(data: bytes) -> tuple[int, int, int]:
    if data[1:2] == b'7':  # PAM: WIDTH and HEIGHT lines before ENDHDR
        head = data[:data.find(b'ENDHDR')] if b'ENDHDR' in data else data
        size = {}
        for line in head.splitlines():
            parts = line.split()
            if parts and parts[0] in (b'WIDTH', b'HEIGHT'):
                if len(parts) != 2 or parts[0] in size:
                    raise _Unreadable(f'{parts[0].decode()} given twice or with other words')
                size[parts[0]] = int(_digits(parts[1]))
        if len(size) != 2:
            raise _Unreadable('no WIDTH and HEIGHT')
        width, height = size[b'WIDTH'], size[b'HEIGHT']
    else:  # P1..P6, PFM (Pf, PF)
        width, height = (int(t) for t in _tokens(data, 2, 2))
    return width, height, width * height


def _sun_raster(data: bytes) -> tuple[int, int, int]:
    width, height = _unpack('>II', data, 4)
    return width, height, width * height


def _radiance(data: bytes) -> tuple[int, int, int]:
    end = data.find(b'\n\n')
    if end < 0:
        raise _Unreadable('no end of header')
    parts = data[end + 2:end + 2 + 64].split(b'\n', 1)[0].split()
    if len(parts) != 4 or parts[0][1:] not in (b'X', b'Y') or parts[2][1:] not in (b'X', b'Y'):
        raise _Unreadable('no resolution line')
    first, second = _int(parts[1]), _int(parts[3])
    width, height = (second, first) if parts[0][1:] == b'Y' else (first, second)
    return width, height, width * height


def _j2k_siz(data: bytes, at: int) -> tuple[int, int, int]:
    xsiz, ysiz, xosiz, yosiz = _unpack('>IIII', data, at + 8)  # after FF4F FF51 Lsiz Rsiz
    width, height = max(xsiz - xosiz, 0), max(ysiz - yosiz, 0)
    return width, height, width * height


def _jpeg2000(data: bytes) -> tuple[int, int, int]:
    if data.startswith(b'\xff\x4f\xff\x51'):
        return _j2k_siz(data, 0)
    pos = 0  # a JP2 file: the boxes in order, to the codestream (jp2c) that OpenJPEG allocates from
    while pos + 8 <= len(data):
        length, kind = _unpack('>I4s', data, pos)
        header = 8
        if length == 1:
            length, = _unpack('>Q', data, pos + 8)
            header = 16
        elif length == 0:
            length = len(data) - pos
        if kind == b'jp2c':
            if data[pos + header:pos + header + 4] != b'\xff\x4f\xff\x51':
                raise _Unreadable('a codestream without its SIZ marker first')
            return _j2k_siz(data, pos + header)
        if length < header:
            break
        pos += length
    raise _Unreadable('no codestream box')


def _refused(data: bytes) -> tuple[int, int, int]:
    raise _Unreadable('a format whose header beit_mm does not read')


#: Every signature some decoder of the pipelines accepts (OpenCV 4's imgcodecs, libjpeg-turbo, tifffile, libwebp),
#: with the parser of its size: (format, test of the first bytes, parser).
DECODER_FORMATS = (
    ('PNG', lambda h: h.startswith(b'\x89PNG'), _png),
    ('JPEG', lambda h: h.startswith(b'\xff\xd8'), _jpeg),
    ('TIFF', lambda h: h[:4] in (b'II*\0', b'MM\0*', b'II+\0', b'MM\0+'), _tiff),
    ('WEBP', lambda h: h[:4] == b'RIFF' and h[8:12] == b'WEBP', _webp),
    ('BMP', lambda h: h.startswith(b'BM'), _bmp),
    ('GIF', lambda h: h[:6] in (b'GIF87a', b'GIF89a'), _gif),
    ('Netpbm', lambda h: h[:1] == b'P' and h[1:2] in b'1234567fF' and h[1:2] != b'' and h[2:3].isspace(), _netpbm),
    ('Sun raster', lambda h: h.startswith(b'\x59\xa6\x6a\x95'), _sun_raster),
    ('Radiance HDR', lambda h: h.startswith((b'#?RADIANCE', b'#?RGBE')), _radiance),
    ('JPEG 2000', lambda h: h.startswith((b'\xff\x4f\xff\x51', b'\0\0\0\x0cjP  ')), _jpeg2000),
    ('OpenEXR', lambda h: h.startswith(b'\x76\x2f\x31\x01'), _refused),
)


def _pillow_header(data: bytes) -> tuple[str, int, int] | None:
    """Pillow's own parser of a format with a signature test (no decompression-bomb check, nothing decoded)."""
    Image.init()
    fp = io.BytesIO(data)
    for fmt in Image.ID:
        factory, accept = Image.OPEN[fmt]
        if accept is None or not accept(data[:16]):
            continue
        fp.seek(0)
        try:
            image = factory(fp, '')
        except Exception:  # noqa: BLE001  (each parser raises its own kinds on bytes not of its format)
            continue
        return fmt, image.size[0], image.size[1]
    return None


def image_header(data: bytes | BinaryIO, source: str = 'image') -> tuple[str, int, int, int] | None:
    """``(format, width, height, pixels)`` of the image in ``data`` (bytes, or a seekable binary file read whole),
    nothing decoded: the file room's parser for every :data:`DECODER_FORMATS` signature, else Pillow's parser of
    any other format it recognizes by signature; ``pixels`` counts every page (TIFF). None when ``data`` is no image.

    Raises:
        ImageHeaderError: ``data`` begins like a :data:`DECODER_FORMATS` image whose size cannot be read, naming
            ``source``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        data.seek(0)
        data = data.read()
    data = bytes(data)
    for fmt, accepts, parse in DECODER_FORMATS:
        if accepts(data[:16]):
            try:
                width, height, pixels = parse(data)
            except _Unreadable as why:
                raise ImageHeaderError(
                    f'image {source} begins like a {fmt} file, but its size cannot be read from its header ({why}); '
                    'a decoder might still read it, with no bound on its pixels, so nothing was decoded. Fix: '
                    'convert it to PNG or JPEG with a standard tool (or give the right file)') from None
            return fmt, width, height, pixels
    header = _pillow_header(data)
    return None if header is None else (*header, header[1] * header[2])


def _refuse(source: str, fmt: str, width: int, height: int, pixels: int, limit: int) -> ImageTooLargeError:
    pages = '' if pixels == width * height else f', {pixels} pixels in all its pages'
    return ImageTooLargeError(
        f'image {source} declares {width} x {height} = {width * height} pixels ({fmt}{pages}), more than the limit of '
        f'{limit} pixels: a decompression bomb, or a larger image than beit_mm reads by default; nothing was '
        f'decoded. Fix: resize it, or, if you mean to read it, raise the limit for every decoder with '
        f'{LIMIT_VARIABLE}={pixels} in the environment')


def check_image_bytes(data: bytes | BinaryIO, source: str) -> tuple[str, int, int] | None:
    """``(format, width, height)`` of the image in ``data`` (read from ``source``; :func:`image_header`), refused
    when it declares more than :func:`max_image_pixels`; bytes that are no image pass (annotation files, ...) and
    give None.

    Raises:
        ImageTooLargeError: naming ``source``, its size, the limit and how to raise it.
        ImageHeaderError: an image signature whose size cannot be read (:func:`image_header`).
        ImageWorkError: a JPEG of more than :data:`MAX_JPEG_SCANS` scans.
    """
    header = image_header(data, source)
    if header is None:
        return None
    fmt, width, height, pixels = header
    limit = max_image_pixels()
    if pixels > limit:
        raise _refuse(source, fmt, width, height, pixels, limit)
    if fmt == 'JPEG':
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data.seek(0)
            data = data.read()
        scans = jpeg_scans(bytes(data))
        if scans > MAX_JPEG_SCANS:
            raise ImageWorkError(
                f'image {source} is a JPEG of more than {MAX_JPEG_SCANS} scans ({width} x {height}): each scan is a '
                'pass over the whole image, and no encoder writes that many (progressive JPEGs have about 10), so it '
                'would cost minutes of decoding; nothing was decoded. Fix: re-encode it with a standard tool '
                '(e.g. convert it to PNG, or to a baseline JPEG)')
    return fmt, width, height
