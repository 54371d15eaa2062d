"""Checkpoint state dicts: prefixes. Opening files and telling what a file's keys say it is live in
:mod:`beit_mm.fileio`."""
from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor


def strip_prefix(state_dict: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Keys starting with ``prefix``, with it removed (e.g. 'backbone.' of a segmentor checkpoint)."""
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
