"""Reading checkpoint files into a flat state dict, with safe (weights-only) unpickling."""
from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

# Keys under which checkpoint files of the supported toolkits keep their weights, in lookup order.
STATE_DICT_KEYS = ('state_dict', 'model', 'module', 'model_state')


def unwrap_state_dict(obj: Mapping) -> dict[str, Tensor]:
    """The weights of a loaded checkpoint: ``obj['state_dict']``, ``obj['model']``, ... or ``obj`` itself."""
    for key in STATE_DICT_KEYS:
        if key in obj and isinstance(obj[key], Mapping):
            return dict(obj[key])
    if not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f'cannot find the weights in this checkpoint: top-level keys are {list(obj)[:8]}; expected '
                         f'one of {STATE_DICT_KEYS} or a flat state dict')
    return dict(obj)


def load_state_dict_file(path: str) -> dict[str, Tensor]:
    """Load a checkpoint file with ``weights_only=True`` (safe unpickling) and return its flat state dict."""
    obj = torch.load(path, map_location='cpu', weights_only=True)
    return unwrap_state_dict(obj)


def strip_prefix(state_dict: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Keys starting with ``prefix``, with it removed (e.g. 'backbone.' of a segmentor checkpoint)."""
    return {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
