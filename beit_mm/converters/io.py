"""Checkpoint state dicts: prefixes and what a file's keys say it is. Opening files lives in
:mod:`beit_mm.apis.checkpoint` (safe unpickling, named errors), re-exported here for the converters."""
from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

from ..apis.checkpoint import (STATE_DICT_KEYS, CheckpointFileError, check_checkpoint_file,  # noqa: F401
                               load_state_dict_file, unwrap_state_dict)


def strip_prefix(state_dict: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Keys starting with ``prefix``, with it removed (e.g. 'backbone.' of a segmentor checkpoint)."""
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}


# What a state dict's keys say about where it comes from: (description, key pattern), first match wins per key.
CHECKPOINT_KINDS = (
    ('a whole segmentor/classifier/MIM model (backbone under "backbone.")', re.compile(r'^backbone\.')),
    ('a CvT (beit_mm or official microsoft/CvT names)', re.compile(r'^stage\d+\.')),
    ('an HF transformers CvT', re.compile(r'^(cvt\.)?encoder\.stages\.')),
    ('an HF transformers BEiT', re.compile(r'^(beit\.)?(encoder\.layer\.|embeddings\.)')),
    ('an mmseg/mmpretrain BEiT', re.compile(r'^layers\.\d+\.')),
    ('a BEiT (beit_mm, unilm or timm names)', re.compile(r'^(blocks\.\d+\.|patch_embed\.proj\.|cls_token$)')),
)


def checkpoint_kind(keys) -> str | None:
    """The :data:`CHECKPOINT_KINDS` description matched by most of ``keys``, or None when none matches."""
    votes: dict[str, int] = {}
    for key in keys:
        for kind, pattern in CHECKPOINT_KINDS:
            if pattern.match(key):
                votes[kind] = votes.get(kind, 0) + 1
                break
    return max(votes, key=votes.get) if votes else None
