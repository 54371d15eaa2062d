"""Loading pretrained weights into a backbone: loud about missing keys, explicit about unexpected ones."""
from __future__ import annotations

from collections.abc import Callable, Mapping

from mmengine.logging import MMLogger
from torch import Tensor, nn

from ...converters.io import load_state_dict_file, strip_prefix


def load_pretrained_backbone(model: nn.Module,
                             checkpoint: str,
                             prefix: str | None = None,
                             adapt: Callable[[Mapping[str, Tensor], nn.Module], dict[str, Tensor]] | None = None,
                             convert_hint: str = '') -> None:
    """Load ``checkpoint`` (a beit_mm-format state dict) into ``model``; raise if any of its parameters is missing.

    Args:
        model: the backbone.
        checkpoint: path of a file written by ``tools/convert_checkpoint.py`` or by a beit_mm training run.
        prefix: keep only keys with this prefix and strip it ('backbone.' for a segmentor/classifier checkpoint).
        adapt: ``adapt(state_dict, model)`` fits the weights to the model (e.g. resamples position tables).
        convert_hint: the converter command to suggest when keys do not match.
    """
    logger = MMLogger.get_current_instance()
    state_dict = load_state_dict_file(checkpoint)
    if prefix:
        stripped = strip_prefix(state_dict, prefix)
        if not stripped:
            raise KeyError(f'{checkpoint} has no key starting with {prefix!r} (first keys: {list(state_dict)[:5]}); '
                           f'fix init_cfg.prefix')
        state_dict = stripped
    if adapt is not None:
        state_dict = adapt(state_dict, model)
    result = model.load_state_dict(state_dict, strict=False)
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
