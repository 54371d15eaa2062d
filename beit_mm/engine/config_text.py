"""MMEngine's config text formatted once per distinct text: a memo in front of the yapf ``FormatCode`` that
``Config.pretty_text`` calls.

A Runner asks for the text about nine times, each a full yapf pass (0.3-0.9 s for a Mask2Former config on one core);
the formatting is a pure function of the text and the style, so the strings are the same as without the memo.
"""
from __future__ import annotations

import functools
from collections.abc import Hashable

import mmengine.config.config as mmengine_config

# the distinct config texts kept (a few KB to a few hundred KB each)
MAX_TEXTS = 16
_YAPF_FORMAT = mmengine_config.FormatCode


@functools.lru_cache(maxsize=MAX_TEXTS)
def _format(text: str, style: tuple | str | None, options: tuple) -> tuple[str, bool]:
    style_config = dict(style) if isinstance(style, tuple) else style
    return _YAPF_FORMAT(text, style_config=style_config, **dict(options))


def format_code(text: str, style_config: dict | str | None = None, **options) -> tuple[str, bool]:
    """yapf's ``FormatCode(text, style_config, **options)``, memoized on its arguments.

    Args:
        text: the Python source to format.
        style_config: yapf's style (a dict of options or a style name).
        options: yapf's other keyword arguments.

    Returns:
        yapf's ``(formatted text, changed)``.
    """
    style = tuple(sorted(style_config.items())) if isinstance(style_config, dict) else style_config
    key_options = tuple(sorted(options.items()))
    if not all(isinstance(value, Hashable) for _, value in (*(style if isinstance(style, tuple) else ()),
                                                            *key_options)):
        return _YAPF_FORMAT(text, style_config=style_config, **options)
    return _format(text, style, key_options)


def memoize_config_formatting() -> None:
    """Route ``Config.pretty_text``'s formatting through :func:`format_code` (idempotent)."""
    mmengine_config.FormatCode = format_code
