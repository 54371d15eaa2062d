"""One way to print a name and one rule for what a name may be: every path, file name or class name a message shows
goes through :func:`shown`; every name a file gives (a file name of a split, a class name of ``classes.txt``, of a
config's ``metainfo``, of a checkpoint's or an ONNX file's ``dataset_meta``) passes :func:`check_name`."""
from __future__ import annotations

import os
import re
import sys
import unicodedata

#: The most characters of one name a message prints; the rest is elided with its length.
MAX_SHOWN_CHARS = 200

#: The most characters a name a file gives may have, one rule for every reader and writer of names. Honest names are
#: far shorter (ADE20K's longest class name has 45 characters, a line of a split a few dozen); a file name ends at
#: 255 bytes on common file systems.
MAX_NAME_CHARS = 256

#: Unicode category Cc (U+0000-U+001F, U+007F-U+009F) and the bidirectional overrides and isolates, which are not Cc
#: but reorder what a terminal shows.
_CONTROL = re.compile('[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]')


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f'\\x{code:02x}'
    if code <= 0xFFFF:
        return f'\\u{code:04x}'
    return f'\\U{code:08x}'


def shown(name: str | bytes | os.PathLike, limit: int = MAX_SHOWN_CHARS) -> str:
    """A name as one printable line: control, format and unpaired surrogate characters escaped, long names elided.

    Args:
        name: a path, file name or any text read from a file (bytes are decoded as the file system would).
        limit: the most characters kept; a longer name keeps its head and tail around ``...(N chars)...``.

    Returns:
        A string with no control characters (no newline, carriage return, escape, bidi override) that a terminal or
        a log shows as written; a backslash is doubled, so the escaped form reads back unambiguously.
    """
    text = os.fsdecode(os.fspath(name)) if not isinstance(name, str) else name
    out = []
    for ch in text:
        if ch == '\\':
            out.append('\\\\')
        elif unicodedata.category(ch) in ('Cc', 'Cf', 'Cs', 'Zl', 'Zp'):
            out.append(_escaped(ch))
        else:
            out.append(ch)
    text = ''.join(out)
    if len(text) > limit:
        keep = max(limit // 2 - 10, 1)
        text = f'{text[:keep]}...({len(text)} chars)...{text[-keep:]}'
    return text


def control_characters(text: str) -> list[str]:
    """The control characters of ``text`` (Unicode category Cc: escape sequences, carriage returns, ...; and the
    bidirectional overrides and isolates), as ``repr`` escapes, in order."""
    return [repr(c)[1:-1] for c in _CONTROL.findall(text)]


def check_name(text: str, source: str, where: str, error: type[Exception] = ValueError) -> str:
    """``text``, a name a file gives, refused when longer than :data:`MAX_NAME_CHARS` or holding
    :func:`control_characters`.

    Args:
        text: the name (a class name, a file name of a split, a string of metadata).
        source: the file that gives it, named in the message.
        where: where in that file (``'line 3'``, ``'meta.dataset_meta.classes[2]'``).
        error: the exception class raised.

    Returns:
        ``text`` unchanged.

    Raises:
        error: naming ``source``, ``where``, the problem and the fix.

    A name is printed (per-class tables at every validation, log lines) and kept in every sample's record: a name of
    a million characters costs that much at each, and an escape sequence acts on the terminal that prints it.
    """
    if len(text) > MAX_NAME_CHARS:
        raise error(f'{shown(source)}: {where} is a name of {len(text)} characters ({shown(text, 60)}), more than the '
                    f'{MAX_NAME_CHARS} a name may have. Fix: check that it is the right file; shorten the name')
    found = control_characters(text)
    if found:
        raise error(f'{shown(source)}: {where} \'{shown(text, 60)}\' holds control character(s) '
                    f'{", ".join(dict.fromkeys(found))}, which would act on the terminal or log that prints it. Fix: '
                    'remove them from the file')
    return text


def one_line(message: str) -> str:
    """A message as one printable line: its lines joined with ``' | '``, any other control, format or surrogate
    character escaped as :func:`shown` escapes it (backslashes kept: the names inside went through :func:`shown`)."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return ''.join(_escaped(ch) if unicodedata.category(ch) in ('Cc', 'Cf', 'Cs', 'Zl', 'Zp') else ch
                   for ch in ' | '.join(lines))


#: The exit status of every named refusal of a tool (argparse's for a usage error).
REFUSED = 2


def refusal(tool: str, error: BaseException | str, speak: bool = True) -> SystemExit:
    """One way for a tool to refuse: print ``<tool>: error: <message>`` as one line (:func:`one_line`) on stderr and
    return the ``SystemExit`` to raise, whose code is :data:`REFUSED` and whose text is that line.

    Args:
        tool: the tool's name (``'train.py'``).
        error: the named error (its message names the problem and the fix) or its text.
        speak: print the line (False on the processes of a distributed run other than rank 0).
    """
    line = f'{tool}: error: {one_line(str(error))}'
    if speak:
        print(line, file=sys.stderr, flush=True)
    stop = SystemExit(line)
    stop.code = REFUSED
    return stop
