"""One way to print a name: every path, file name or class name a message shows goes through :func:`shown`."""
from __future__ import annotations

import os
import unicodedata

#: The most characters of one name a message prints; the rest is elided with its length.
MAX_SHOWN_CHARS = 200


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
