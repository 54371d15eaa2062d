"""Small text files from strangers (a dataset's ``classes.txt`` and ``palette.txt``): size bounded before reading, the
encoding checked, a named error instead of a traceback or a silently mangled line; and list files (a split) checked
line by line before a reader expands them."""
from __future__ import annotations

import os

from .inputs import open_input
from .names import MAX_NAME_CHARS, check_name, control_characters, shown


MAX_TEXT_BYTES = 1 * 2**20  # a class list of 10k names is ~100 KB
LIST_BLOCK_BYTES = 2**20  # a list file is read in blocks of this size


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


def check_name_list(path: str, error: type[Exception] = TextFileError, kind: str = 'split') -> int:
    """Check the list file ``path`` (a split: one file name per line, as mmseg's and mmpretrain's datasets read an
    ``ann_file``) line by line, before any reader expands it.

    Every line is a name (:func:`~beit_mm.fileio.names.check_name`), none blank, none twice (lines compared without
    surrounding whitespace, as the datasets strip them). Memory is one block of :data:`LIST_BLOCK_BYTES` and one entry
    per distinct name read so far; the first problem stops the reading.

    Args:
        path: the list file.
        error: the exception class raised.
        kind: what the file is, for the message.

    Returns:
        The number of names.

    Raises:
        FileNotFoundError: no such file (NotARegularFileError: not a regular file).
        error: a line that is not UTF-8, blank, longer than a name, holding control characters, or repeating an
            earlier line; naming the file, both line numbers and the fix.
    """
    seen: dict[str, int] = {}
    number, tail = 0, b''
    with open_input(path, kind) as f:
        for block in iter(lambda: f.read(LIST_BLOCK_BYTES), b''):
            lines = (tail + block).split(b'\n')
            tail = lines.pop()  # the unfinished last line, completed by the next block
            if len(tail) > 4 * MAX_NAME_CHARS:  # UTF-8 bytes of the longest name
                raise error(f'{shown(path)}: line {number + len(lines) + 1} is longer than a name may be '
                            f'({MAX_NAME_CHARS} characters). Fix: check that it is the right file; one name per line')
            _check_names(lines, number, seen, path, error, kind)
            number += len(lines)
        if tail:
            _check_names([tail], number, seen, path, error, kind)
    return len(seen)


def _check_names(lines: list[bytes], number: int, seen: dict[str, int], path: str, error: type[Exception],
                 kind: str) -> None:
    """Check the lines ``number + 1 ...`` of a list file (:func:`check_name_list`), adding their names to ``seen``
    (name -> first line). One block at a time; each line on its own only where the block holds a problem."""
    try:
        text = b'\n'.join(lines).decode('utf-8-sig' if number == 0 else 'utf-8')
    except UnicodeDecodeError:
        text = None
    names = [line.strip() for line in text.split('\n')] if text is not None else []
    if text is None or not all(names) or max(map(len, names)) > MAX_NAME_CHARS or control_characters(' '.join(names)):
        names = []
        for i, raw in enumerate(lines, number + 1):
            try:
                name = raw.decode('utf-8-sig' if i == 1 else 'utf-8').strip()
            except UnicodeDecodeError as bad:
                raise error(f'{shown(path)}: line {i} is not UTF-8 text ({bad.reason}). Fix: save the {kind} file as '
                            'UTF-8 text') from None
            if not name:
                raise error(f'{shown(path)}: line {i} is blank; every line of a {kind} file names one file, and a '
                            'blank one becomes a sample without a file. Fix: delete the blank lines')
            names.append(check_name(name, path, f'line {i}', error))
    for i, name in enumerate(names, number + 1):
        first = seen.setdefault(name, i)
        if first != i:
            raise error(f'{shown(path)}: line {i} names {shown(name, 60)} again (first on line {first}); a {kind} file '
                        'names each file once, and every repeat becomes one more sample of that file. Fix: delete the '
                        'repeated lines')
