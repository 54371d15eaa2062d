"""Loading pretrained weights into a backbone: loud about missing keys, explicit about unexpected ones."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from mmengine.logging import MMLogger
from torch import Tensor, nn

from ...fileio.checkpoint import (CHECKPOINT_KINDS, CheckpointFileError, checkpoint_kind, load_state_dict_file,
                                  strip_prefix)


def load_pretrained_backbone(model: nn.Module,
                             checkpoint: str,
                             prefix: str | None = None,
                             adapt: Callable[[Mapping[str, Tensor], nn.Module], dict[str, Tensor]] | None = None,
                             convert_hint: str = '',
                             keep_init: Sequence[str] = ()) -> None:
    """Load a beit_mm state dict into ``model``; raise if any of its parameters is missing.

    Args:
        model: the backbone.
        checkpoint: path of a beit_mm-format file.
        prefix: keep only keys with this prefix, stripped.
        adapt: ``adapt(state_dict, model)`` fits the weights to the model.
        convert_hint: the converter command to suggest when keys do not match.
        keep_init: ``re.search`` patterns of weights that keep their values; each must match one.
    """
    logger = MMLogger.get_current_instance()
    state_dict = load_state_dict_file(checkpoint)
    if prefix:
        stripped = strip_prefix(state_dict, prefix)
        if not stripped:
            raise KeyError(
                f'{checkpoint} has no key starting with init_cfg.prefix={prefix!r}; it looks like '
                f'{checkpoint_kind(state_dict) or "an unknown model"} (first keys: {list(state_dict)[:4]}); fix '
                'init_cfg.prefix: prefix=None for a backbone-only file (tools/convert_checkpoint.py output), '
                "prefix='backbone.' for a whole segmentor/classifier/MIM checkpoint")
        state_dict = stripped
    check_checkpoint_kind(state_dict, model, checkpoint, convert_hint)
    if adapt is not None:
        state_dict = adapt(state_dict, model)
    kept = kept_init_names(model, keep_init)
    state_dict = {k: v for k, v in state_dict.items() if k not in kept}
    result = model.load_state_dict(state_dict, strict=False)
    result.missing_keys[:] = [k for k in result.missing_keys if k not in kept]
    if kept:
        logger.warning(f'{checkpoint}: {len(kept)} backbone weights keep their random init (init_cfg.keep_init='
                       f'{list(keep_init)}): {sorted(kept)[:8]}{" ..." if len(kept) > 8 else ""}')
    if result.missing_keys:
        raise RuntimeError(
            f'{checkpoint}: {len(result.missing_keys)} of the backbone\'s {len(model.state_dict())} weights are missing '
            f'from the checkpoint (first: {result.missing_keys[:6]}); {len(result.unexpected_keys)} checkpoint keys '
            f'are unused (first: {result.unexpected_keys[:6]}). Refusing to train from a partly random backbone. '
            f'{convert_hint}'.strip())
    if result.unexpected_keys:
        logger.warning(f'{checkpoint}: {len(result.unexpected_keys)} checkpoint keys are not used by the backbone: '
                       f'{result.unexpected_keys[:10]}')
    logger.info(f'loaded {len(state_dict) - len(result.unexpected_keys)} backbone weights from {checkpoint} '
                f'(0 missing, {len(result.unexpected_keys)} unexpected)')


def kept_init_names(model: nn.Module, patterns: Sequence[str]) -> set[str]:
    """Names of ``model.state_dict()`` matching any of ``patterns``; one matching nothing raises."""
    if isinstance(patterns, str):
        patterns = [patterns]
    names = list(model.state_dict())
    kept: set[str] = set()
    for pattern in patterns:
        matched = {n for n in names if re.search(pattern, n)}
        if not matched:
            raise ValueError(f"init_cfg.keep_init pattern '{pattern}' matches none of the backbone's {len(names)} "
                             f'weight names (e.g. {names[:3]} ... {names[-2:]}); fix the pattern (re.search)')
        kept |= matched
    return kept


def check_checkpoint_kind(state_dict: Mapping[str, Tensor], model: nn.Module, checkpoint: str,
                          convert_hint: str = '') -> None:
    """Raise a named error when the checkpoint's keys belong to another kind of model than
    ``model``'s."""
    have, want = checkpoint_kind(state_dict), checkpoint_kind(model.state_dict())
    if have is None or want is None or have == want:
        return
    examples = list(state_dict)[:3]
    if have == CHECKPOINT_KINDS[0][0]:
        raise CheckpointFileError(
            f'{checkpoint} is {have} (keys like {examples}), but init_cfg has no prefix. Fix: '
            "init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.')")
    raise CheckpointFileError(
        f'{checkpoint} holds {have} state dict (keys like {examples}), but this backbone ({type(model).__name__}) '
        f'is {want}. Fix: give a checkpoint of this architecture, or change the backbone type to match the file. '
        f'{convert_hint}'.strip())
