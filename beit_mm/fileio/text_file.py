"""Small text files from strangers (a dataset's ``classes.txt`` and ``palette.txt``): size bounded before reading, the
encoding checked, a named error instead of a traceback or a silently mangled line."""
from __future__ import annotations

import os
import unicodedata

from .inputs import open_input

MAX_TEXT_BYTES = 1 * 2**20  # a class list of 10k names is ~100 KB


class TextFileError(ValueError):
    """A text file that cannot be read as one; the message names it, the problem and the fix."""


def read_bounded(path: str, max_bytes: int, error: type[Exception], kind: str) -> bytes:
    """The bytes of the regular file ``path``, its size checked first, read once (at most ``max_bytes`` + 1).

    Raises:
        FileNotFoundError: no such file; NotARegularFileError (a FileNotFoundError): a folder, FIFO or device, unread.
        error: larger than ``max_bytes`` (the message says a ``kind`` file cannot be that large).
    """
    with open_input(path, kind) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise error(f'{path} is {size} bytes, more than the {max_bytes} a {kind} file of this kind can hold. '
                        'Fix: check that it is the right file')
        return f.read(max_bytes + 1)


def read_text_lines(path: str, max_bytes: int = MAX_TEXT_BYTES) -> list[str]:
    """The lines of the UTF-8 text file ``path`` (a BOM and the line ends dropped, each line's trailing whitespace
    stripped; blank lines kept, so line ``i`` stays at index ``i``).

    Raises:
        FileNotFoundError: no such file (or it is a folder).
        TextFileError: larger than ``max_bytes``, or not UTF-8 text.
    """
    data = read_bounded(path, max_bytes, TextFileError, 'text')
    try:
        text = data.decode('utf-8-sig')
    except UnicodeDecodeError as error:
        raise TextFileError(f'{path} is not UTF-8 text ({error.reason} at byte {error.start}). Fix: save it as UTF-8 '
                            'text') from None
    if '\0' in text:
        raise TextFileError(f'{path} holds NUL bytes: not a text file. Fix: check that it is the right file')
    return [line.rstrip() for line in text.splitlines()]


def control_characters(text: str) -> list[str]:
    """The control characters of ``text`` (Unicode category Cc: escape sequences, carriage returns, ...; and the
    bidirectional overrides and isolates, which reorder what a terminal shows), as ``repr`` escapes, in order."""
    bidi = {'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'}
    return [repr(c)[1:-1] for c in text if unicodedata.category(c) == 'Cc' or c in bidi]


def check_printable(text: str, source: str, where: str, error: type[Exception] = TextFileError) -> str:
    """``text`` (a name a file gives: a class, a palette entry, metadata), refused when it holds
    :func:`control_characters`: printed to a terminal or a log, an escape sequence would act there.

    Raises:
        error: naming ``source``, ``where``, the characters and the fix.
    """
    found = control_characters(text)
    if found:
        raise error(f'{source}: {where} {text[:40]!r} holds control character(s) {", ".join(dict.fromkeys(found))}, '
                    'which would act on the terminal or log that prints it. Fix: remove them from the file')
    return text
