"""MMEngine's config text formatted once per distinct text: a memo in front of yapf's ``FormatCode`` (a Runner asks
for the same text about nine times)."""
from __future__ import annotations

import functools
from collections.abc import Hashable

import mmengine.config.config as mmengine_config

MAX_TEXTS = 16
_YAPF_FORMAT = mmengine_config.FormatCode


@functools.lru_cache(maxsize=MAX_TEXTS)
def _format(text: str, style: tuple | str | None, options: tuple) -> tuple[str, bool]:
    style_config = dict(style) if isinstance(style, tuple) else style
    return _YAPF_FORMAT(text, style_config=style_config, **dict(options))


def format_code(text: str, style_config: dict | str | None = None, **options) -> tuple[str, bool]:
    """yapf's ``FormatCode(text, style_config, **options)``, memoized on its arguments."""
    style = tuple(sorted(style_config.items())) if isinstance(style_config, dict) else style_config
    key_options = tuple(sorted(options.items()))
    if not all(isinstance(value, Hashable) for _, value in (*(style if isinstance(style, tuple) else ()),
                                                            *key_options)):
        return _YAPF_FORMAT(text, style_config=style_config, **options)
    return _format(text, style, key_options)


def memoize_config_formatting() -> None:
    """Route ``Config.pretty_text``'s formatting through :func:`format_code` (idempotent)."""
    mmengine_config.FormatCode = format_code
