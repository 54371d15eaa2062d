"""A trained ``beit_mm.DVAE`` run's checkpoint -> ``beit_mm.DALLEEncoder`` state dict (pure function).

The DVAE keeps its encoder under ``encoder.`` with ``DALLEEncoder``'s own names (``encoder.blocks.input.weight``, ...),
so extraction only selects and strips that prefix; the decoder (``decoder.*``) is dropped.
"""
from collections.abc import Mapping

import torch

_PREFIX = 'encoder.'


def extract_dvae_encoder(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The encoder of a trained ``beit_mm.DVAE`` as a plain ``DALLEEncoder`` state dict.

    Args:
        state_dict: the ``state_dict`` entry of a DVAE checkpoint written by ``tools/train.py`` (keys
            ``encoder.blocks.*`` and ``decoder.blocks.*``; a ``module.`` prefix from a DDP-wrapped model is accepted).
    Returns:
        ``{'blocks.input.weight': (n_hid, 3, 7, 7), ..., 'blocks.output.conv.bias': (vocab_size,)}``, loadable with
        ``strict=True`` into ``DALLEEncoder`` built with the DVAE's group_count / n_hid / n_blk_per_group /
        input_channels / vocab_size.
    Raises:
        ValueError: a whole checkpoint was passed (has ``state_dict``), or no ``encoder.blocks.*`` keys exist.
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
