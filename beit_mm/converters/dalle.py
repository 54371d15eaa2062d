"""DALL-E dVAE encoder checkpoints (OpenAI's ``encoder.pkl``, mmpretrain 1.2's) -> ``beit_mm.DALLEEncoder`` names."""
import re
import warnings
from collections.abc import Mapping

import torch

SOURCES = ('openai', 'mmpretrain')
_MMPRETRAIN_PREFIX = 'target_generator.'
# blocks.input | blocks.group_G.block_K.res_path.conv_N | blocks.group_G.block_K.id_path | blocks.output.conv
_DALLE_KEY = re.compile(r'^(blocks\.(?:input|output\.conv|group_\d+\.block_\d+\.(?:id_path|res_path\.conv_\d+)))'
                        r'\.(w|b)$')
_RENAME = {'w': 'weight', 'b': 'bias'}


def load_openai_encoder(path: str) -> dict[str, torch.Tensor]:
    """State dict of OpenAI's ``encoder.pkl``, a pickled ``dall_e.encoder.Encoder``.

    Unpickling runs code from the file (needs ``dall_e``): do it once, for a trusted file.

    Args:
        path: the ``encoder.pkl`` file.
    Returns:
        its state dict (``blocks.*.w`` / ``blocks.*.b``).
    """
    import dall_e  # noqa: F401  (the pickle refers to dall_e.encoder.Encoder; fails early with a clear message)

    warnings.warn(f'unpickling {path} with torch.load(weights_only=False): this runs code from the file; only do it '
                  'for trusted files (the official encoder.pkl) and keep the converted state dict instead',
                  stacklevel=2)
    module = torch.load(path, map_location='cpu', weights_only=False)
    if isinstance(module, Mapping):
        raise ValueError(f'{path} holds a mapping with keys {sorted(module)[:5]}..., not a pickled dall_e Encoder; '
                         'if it is already a state dict, pass it to convert_dalle directly')
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f'{path} holds a {type(module).__name__}, expected a pickled dall_e.encoder.Encoder')
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def convert_dalle(state_dict: Mapping[str, torch.Tensor], source: str) -> dict[str, torch.Tensor]:
    """Rename a DALL-E encoder state dict (``w``/``b``) to ``beit_mm.DALLEEncoder``'s (``weight``/``bias``).

    Args:
        state_dict: ``blocks.*.{w,b}`` keys, or a whole mmpretrain ``state_dict`` under ``target_generator.``.
        source: ``'openai'`` or ``'mmpretrain'``.
    Returns:
        ``{'blocks.input.weight': (n_hid, 3, 7, 7), ..., 'blocks.output.conv.bias': (vocab_size,)}``.
    Raises:
        ValueError: unknown ``source``, or keys that are not DALL-E encoder parameters.
    """
    if source not in SOURCES:
        raise ValueError(f'unknown source {source!r}; use one of {SOURCES}')
    keys = list(state_dict)
    prefixed = [k for k in keys if k.startswith(_MMPRETRAIN_PREFIX)]
    if source == 'mmpretrain' and prefixed:
        state_dict = {k[len(_MMPRETRAIN_PREFIX):]: state_dict[k] for k in prefixed}
    elif source == 'openai' and prefixed:
        raise ValueError(f'state dict has {len(prefixed)} keys under {_MMPRETRAIN_PREFIX!r} '
                         f'({prefixed[0]}, ...): a whole mmpretrain checkpoint; pass --source mmpretrain')

    out: dict[str, torch.Tensor] = {}
    unexpected = []
    for key, value in state_dict.items():
        match = _DALLE_KEY.match(key)
        if match is None:
            unexpected.append(key)
            continue
        out[f'{match.group(1)}.{_RENAME[match.group(2)]}'] = value
    if unexpected:
        if not out and all(k.endswith(('.weight', '.bias')) for k in unexpected):
            hint = 'it looks already converted (weight/bias names); load it into DALLEEncoder directly'
        elif source == 'openai' and any(k.startswith(('backbone.', 'neck.', 'head.')) for k in keys):
            hint = 'a whole mmpretrain checkpoint; pass --source mmpretrain to take its target_generator.* keys'
        else:
            hint = 'expected a DALL-E encoder (openai encoder.pkl or mmpretrain dalle_encoder.pth)'
        raise ValueError(f'{len(unexpected)} unexpected keys for source {source!r} '
                         f'({", ".join(unexpected[:5])}{", ..." if len(unexpected) > 5 else ""}): {hint}')
    if not out:
        raise ValueError(f'no DALL-E encoder keys found for source {source!r}; expected blocks.input.w etc.')
    return out
