"""How deep a JSON text nests, found without parsing it: a vectorized scan in bounded chunks, so a library's JSON
reader (Python's ``json``, which recurses once per level) never meets a depth it cannot hold.

Python's ``json`` raises ``RecursionError`` deep in its parser on a file of 100k ``[``; pycocotools, mmdet and
MMEngine call it on annotation files without a bound. :func:`json_depth` counts ``[``/``{`` minus ``]``/``}`` outside
strings (a quote after an odd run of backslashes is escaped; a backslash outside a string ends Python's parser there,
so the scan never counts less than the parser reaches) over chunks of at most
:data:`CHUNK_BYTES`; memory stays a few times one chunk, for a file of any size.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MAX_JSON_DEPTH = 64  # HF configs nest 3-4 levels, COCO annotation files 5
CHUNK_BYTES = 2**20

_QUOTE, _BACKSLASH = ord('"'), ord('\\')
_OPENS, _CLOSES = (ord('['), ord('{')), (ord(']'), ord('}'))


class JSONFileError(ValueError):
    """A JSON file or text that cannot be read as one; the message names it, the problem and the fix."""


def json_depth(chunks: Iterable[bytes]) -> int:
    """The deepest nesting of ``[``/``{`` outside strings of the UTF-8 JSON text given as consecutive ``chunks``."""
    depth = deepest = 0
    in_string, backslashes = False, 0  # carried across chunks: inside a string, backslashes ending the chunk
    for chunk in chunks:
        b = np.frombuffer(chunk, np.uint8)
        n = b.size
        if n == 0:
            continue
        quotes = np.flatnonzero(b == _QUOTE)
        escaped = np.zeros(quotes.size, bool)
        if quotes.size and quotes[0] == 0:
            escaped[0] = backslashes % 2 == 1
        runs = np.flatnonzero(b == _BACKSLASH)
        if runs.size:  # runs of backslashes: (start, end) inclusive; a quote right after an odd run is escaped
            breaks = np.flatnonzero(np.diff(runs) != 1)
            starts = np.concatenate((runs[:1], runs[breaks + 1]))
            ends = np.concatenate((runs[breaks], runs[-1:]))
            lengths = ends - starts + 1
            if starts[0] == 0:
                lengths[0] += backslashes
            at = np.minimum(np.searchsorted(ends, quotes - 1), ends.size - 1)
            escaped |= (ends[at] == quotes - 1) & (lengths[at] % 2 == 1)
            backslashes = int(lengths[-1]) if ends[-1] == n - 1 else 0
        else:
            backslashes = 0
        quotes = quotes[~escaped]
        opens = (b == _OPENS[0]) | (b == _OPENS[1])
        brackets = np.flatnonzero(opens | (b == _CLOSES[0]) | (b == _CLOSES[1]))
        outside = (np.searchsorted(quotes, brackets) + in_string) % 2 == 0
        steps = np.where(opens[brackets[outside]], 1, -1)
        if steps.size:
            levels = np.cumsum(steps) + depth
            deepest = max(deepest, int(levels.max()))
            depth = int(levels[-1])
        in_string = bool((in_string + quotes.size) % 2)
    return deepest


def text_chunks(data: bytes) -> Iterable[bytes]:
    """``data`` in chunks of :data:`CHUNK_BYTES` (views, no copies)."""
    view = memoryview(data)
    for start in range(0, len(data), CHUNK_BYTES):
        yield view[start:start + CHUNK_BYTES].tobytes()


def check_json_depth(chunks: Iterable[bytes], source: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse the JSON text ``chunks`` (named ``source``) when it nests deeper than ``max_depth``.

    Raises:
        JSONFileError: naming ``source``, its depth and the bound.
    """
    depth = json_depth(chunks)
    if depth > max_depth:
        raise JSONFileError(f'{source} nests {depth} levels deep, more than {max_depth}: not a file of this kind '
                            '(a JSON reader would fail with RecursionError). Fix: check that it is the right file')
