"""One refusal for an image a decoder cannot read: Pillow's ``UnidentifiedImageError`` about a ``BytesIO``,
OpenCV's empty result and torchvision's ``RuntimeError`` name no file, so every decode path turns them into
:class:`ImageDecodeError`, naming the file as :func:`~.names.shown` prints it."""
from __future__ import annotations

import os

from .names import shown


class ImageDecodeError(ValueError):
    """An image file a decoder cannot read (truncated, corrupt, or no image)."""


def decode_refusal(source: str | os.PathLike, decoder: str, error: BaseException | None = None) -> ImageDecodeError:
    """The refusal of the image file ``source`` that ``decoder`` (``'Pillow'``, ``'OpenCV'``, ``'torchvision'``)
    could not read, with the first line of its ``error`` when it gave one; raise it ``from None``."""
    first_line = (str(error).splitlines() or [''])[0] if error is not None else ''
    why = '' if error is None else f' ({type(error).__name__}: {shown(first_line)})'
    return ImageDecodeError(f'image {shown(source)}: {decoder} cannot decode it{why}: a truncated or corrupt file, or '
                            'no image; nothing of it was used. Fix: check the file (re-encode it with a standard tool, '
                            'or remove it from the data)')
