"""JSON files from strangers: size and nesting bounded before parsing (Python's ``json`` recurses once per level and
reads any size), a named error instead of a traceback."""
from __future__ import annotations

import json

from .json_depth import MAX_JSON_DEPTH, JSONFileError, check_json_depth, text_chunks  # noqa: F401
from .text_file import read_bounded

MAX_JSON_BYTES = 16 * 2**20  # configs and records are kilobytes; a tokenizer vocabulary a few MB


def parse_json(text: str | bytes, source: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH):
    """``json.loads(text)`` after bounding its length and nesting; ``source`` names it in errors.

    Raises:
        JSONFileError: too long, too deep, or not JSON.
    """
    if len(text) > max_bytes:
        raise JSONFileError(f'{source} is {len(text)} bytes, more than the {max_bytes} a JSON file of this kind can '
                            'hold. Fix: check that it is the right file')
    data = text if isinstance(text, bytes) else text.encode('utf-8', errors='replace')
    check_json_depth(text_chunks(data), source, max_depth)
    if isinstance(text, bytes):
        text = text.decode('utf-8', errors='replace')
    try:
        return json.loads(text)
    except ValueError as error:
        raise JSONFileError(f'{source} is not valid JSON ({error}). Fix: download/copy it again') from None


def read_json(path: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH):
    """The content of the JSON file ``path``, bounded (:func:`parse_json`); the size is checked before reading.

    Raises:
        FileNotFoundError: no such file.
        JSONFileError: too large, too deep, or not JSON.
    """
    return parse_json(read_bounded(path, max_bytes, JSONFileError, 'JSON'), path, max_bytes, max_depth)
