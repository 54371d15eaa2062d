"""A ``beit_mm.DVAE`` checkpoint -> its encoder as a ``beit_mm.DALLEEncoder`` state dict (pure function)."""
from collections.abc import Mapping

import torch

_PREFIX = 'encoder.'


def extract_dvae_encoder(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The encoder of a ``beit_mm.DVAE`` state dict as a ``DALLEEncoder`` state dict.

    Raises:
        ValueError: a whole checkpoint (with ``state_dict``) or no ``encoder.blocks.*`` keys.
    """
    if 'state_dict' in state_dict and isinstance(state_dict['state_dict'], Mapping):
        raise ValueError('got a whole checkpoint (it has a "state_dict" entry); pass checkpoint["state_dict"]')
    state_dict = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in state_dict.items()}
    out = {k[len(_PREFIX):]: v for k, v in state_dict.items() if k.startswith(_PREFIX + 'blocks.')}
    if not out:
        sample = ', '.join(list(state_dict)[:5])
        raise ValueError(f'no encoder.blocks.* keys in the state dict (first keys: {sample}); expected a beit_mm.DVAE '
                         'checkpoint. A DALL-E encoder from OpenAI or mmpretrain converts with '
                         'beit_mm.converters.dalle.convert_dalle instead')
    return out
