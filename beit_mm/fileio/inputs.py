"""Opening inputs as regular files only, MMEngine's local reads included (:class:`InputLocalBackend`, which also
bounds an image's pixels before decoding).

A FIFO or a device can block ``open()`` forever, so :func:`open_input` opens with ``O_NONBLOCK`` and reads only once
``fstat`` of that same descriptor says a regular file.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mmengine.fileio import LocalBackend
from PIL import Image

from .images import DECODER_FORMATS, check_image_bytes
from .json_depth import CHUNK_BYTES, check_json_depth, text_chunks

_KINDS = ((stat.S_ISDIR, 'a folder'), (stat.S_ISFIFO, 'a FIFO (named pipe)'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'))


#: A file may be at most twice its allocated blocks plus this many bytes (a sparse file is mostly holes).
SPARSE_SLACK = 2**20


class SparseFileError(ValueError):
    """An input whose apparent size is far beyond the blocks it occupies on disk (a sparse file)."""


class NotARegularFileError(FileNotFoundError):
    """An input path that names no regular file (a FIFO, a device, a socket, a folder); a ``FileNotFoundError``,
    so every handler of a missing input handles it too."""


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), f'not a regular file (mode {oct(mode)})')


def refusal(path: str, mode: int, what: str = 'input') -> NotARegularFileError:
    return NotARegularFileError(
        f'{what} {path} is {_kind(mode)}, not a regular file: beit_mm reads inputs only from regular files (opening a '
        'FIFO or a device could wait forever or never end); nothing was read. Fix: give the path of the file itself '
        '(copy the data into a file first)')


def open_input_fd(path: str | os.PathLike, what: str = 'input') -> int:
    """A descriptor open for reading on the regular file ``path``, blocking mode restored; the caller closes it. The
    apparent size is bounded by what the disk holds (:data:`SPARSE_SLACK`).

    Raises:
        FileNotFoundError: no such file.
        NotARegularFileError: a FIFO, device, socket or folder.
        SparseFileError: a sparse file.
    """
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, 'O_NOCTTY', 0))
    except IsADirectoryError:
        raise refusal(path, stat.S_IFDIR, what) from None
    except FileNotFoundError:
        raise FileNotFoundError(f'{what} {path} does not exist. Fix: check the path') from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refusal(path, info.st_mode, what)
        allocated = 512 * info.st_blocks
        if info.st_size > 2 * allocated + SPARSE_SLACK:
            raise SparseFileError(
                f'{what} {path} is {info.st_size} bytes long but occupies {allocated} bytes on disk: a sparse file '
                '(its holes read as zeros), which no tool writes for images, checkpoints or annotations; every byte '
                'read costs memory the disk never held, so nothing was read. Fix: give the file as written by its '
                'tool (copy it with `cp --sparse=never` if a copy or an unpacked archive made it sparse)')
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_input(path: str | os.PathLike, what: str = 'input') -> BinaryIO:
    """``open(path, 'rb')`` for a regular file only: the one way the file room opens an input.

    Raises:
        FileNotFoundError, NotARegularFileError: as :func:`open_input_fd`.
    """
    return open(path, 'rb', opener=lambda name, flags: open_input_fd(name, what))  # .name: the path


def check_regular_file(path: str | os.PathLike, what: str = 'input') -> int:
    """The size of the regular file ``path``, nothing read, for a library that opens the path itself.

    Raises:
        FileNotFoundError, NotARegularFileError: as :func:`open_input_fd`.
    """
    fd = open_input_fd(path, what)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_input(path: str | os.PathLike, what: str = 'input') -> bytes:
    """All bytes of the regular file ``path`` (:func:`open_input`)."""
    with open_input(path, what) as f:
        return f.read()


def _check_image(f: BinaryIO, path: str) -> tuple[str, int, int]:
    header = check_image_bytes(f, path)
    if header is None:
        raise ValueError(f'input {path} is not an image (its header is none of '
                         f'{", ".join(fmt for fmt, _, _ in DECODER_FORMATS)} nor another format Pillow reads). Fix: '
                         'give image files or folders of them')
    return header


def check_image_file(path: str) -> tuple[str, int, int]:
    """``(format, width, height)`` of the image file ``path``, from its header, within the pixel limit.

    Raises:
        FileNotFoundError, NotARegularFileError: no regular file.
        ImageTooLargeError: over the limit.
        ImageHeaderError: the signature of an image whose size cannot be read.
        ValueError: not an image.
    """
    with open_input(path, 'image') as f:
        return _check_image(f, path)


def open_image(path: str) -> Image.Image:
    """The image file ``path`` loaded with Pillow after the checks of :func:`check_image_file` on the same open
    file.

    Raises:
        FileNotFoundError, NotARegularFileError, ImageTooLargeError, ImageHeaderError: as :func:`check_image_file`.
        PIL.UnidentifiedImageError, OSError: not an image, or truncated.
    """
    with open_input(path, 'image') as f:
        check_image_bytes(f, path)
        f.seek(0)
        image = Image.open(f)
        image.load()
    return image


class InputLocalBackend(LocalBackend):
    """MMEngine's ``LocalBackend`` reading regular files only; ``get`` refuses an image over the pixel limit before
    any decoder sees it, and a ``.json`` file's nesting is bounded before a parser recurses into it."""

    def get(self, filepath: str | Path) -> bytes:
        data = read_input(filepath)
        check_image_bytes(data, str(filepath))
        return data

    def get_text(self, filepath: str | Path, encoding: str = 'utf-8') -> str:
        data = read_input(filepath)
        if str(filepath).endswith('.json'):
            check_json_depth(text_chunks(data), str(filepath))
        return data.decode(encoding)

    @contextlib.contextmanager
    def get_local_path(self, filepath: str | Path) -> Iterator[str | Path]:
        if str(filepath).endswith('.json'):  # annotation files that pycocotools and mmdet parse by name
            with open_input(filepath) as f:
                check_json_depth(iter(lambda: f.read(CHUNK_BYTES), b''), str(filepath))
        else:
            check_regular_file(filepath)
        yield filepath


def register_input_backend() -> None:
    """Make :class:`InputLocalBackend` MMEngine's backend of local paths, dropping a cached plain ``LocalBackend``
    (idempotent)."""
    from mmengine.fileio import io, register_backend
    register_backend('local', InputLocalBackend, force=True, prefixes='')
    for key, backend in list(io.backend_instances.items()):
        if type(backend) is LocalBackend:
            del io.backend_instances[key]
