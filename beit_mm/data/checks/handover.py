"""The hand-over from the worker to the device: every key a pipeline's transforms hand to the data preprocessor (their
class attributes ``key`` and ``handover``) must be listed in the ``meta_keys`` of the pack transform after them.

The pack transforms drop unlisted keys silently, so a missing key would train without its augmentation.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from beit_mm.registry import TRANSFORMS, config_class

DATALOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


class HandoverError(ValueError):
    """A key a transform hands to the data preprocessor does not reach it."""


def _name(transform: Mapping) -> str:
    kind = transform.get('type', '')
    return kind.__name__ if isinstance(kind, type) else str(kind)


def handover_keys(transform: Mapping, scope: str | None = None) -> tuple[str, ...]:
    """The keys the transform configured by ``transform`` hands to the data preprocessor (empty for most)."""
    kind = config_class(transform.get('type'), TRANSFORMS, scope)
    if kind is None or not hasattr(kind, 'key'):
        return ()
    return tuple(getattr(kind, 'handover', (kind.key, )))


def pack_classes() -> tuple[type, ...]:
    """The pack transforms of mmpretrain, mmseg and mmdet, whose ``meta_keys`` decide what reaches the device."""
    from mmdet.datasets.transforms import PackDetInputs
    from mmpretrain.datasets.transforms import PackInputs
    from mmseg.datasets.transforms import PackSegInputs
    return PackInputs, PackSegInputs, PackDetInputs


def packed_keys(transform: Mapping, scope: str | None = None) -> tuple[str, ...] | None:
    """The metainfo keys a pack transform (or a subclass) keeps; None for any other transform."""
    kind = config_class(transform.get('type'), TRANSFORMS, scope)
    if kind is None or not issubclass(kind, pack_classes()):
        return None
    if 'meta_keys' in transform:
        return tuple(transform['meta_keys'])
    return tuple(inspect.signature(kind).parameters['meta_keys'].default)


def _flat(pipeline: Sequence) -> list[Mapping]:
    """The transforms of ``pipeline`` in order, those nested in a wrapper (``transforms=[...]``) included."""
    flat = []
    for transform in pipeline:
        if isinstance(transform, Mapping):
            flat.append(transform)
            nested = transform.get('transforms')
            flat.extend(_flat(nested) if isinstance(nested, Sequence) and not isinstance(nested, str) else [])
        elif isinstance(transform, Sequence) and not isinstance(transform, str):
            flat.extend(_flat(transform))
    return flat


def check_pipeline(pipeline: Sequence, where: str = 'the pipeline', scope: str | None = None) -> None:
    """Check that every handed-over key of ``pipeline`` is packed after it; unscoped type names are looked up in
    ``scope`` (a config's ``default_scope``).

    Raises:
        HandoverError: a key no later pack transform lists in its ``meta_keys``, or no pack transform after it.
    """
    pending: dict[str, str] = {}  # key -> the transform that hands it over
    for transform in _flat(pipeline):
        for key in handover_keys(transform, scope):
            pending[key] = _name(transform)
        packed = packed_keys(transform, scope)
        if packed is None:
            continue
        for key, sampler in pending.items():
            if key not in packed:
                raise HandoverError(
                    f"{where}: {sampler} hands '{key}' to the data preprocessor, but {_name(transform)} drops it: "
                    f"its meta_keys {packed} do not list '{key}', so the run would train without it. Fix: add "
                    f"'{key}' to {_name(transform)}(meta_keys=...)")
        pending = {}
    for key, sampler in pending.items():
        raise HandoverError(f"{where}: {sampler} hands '{key}' to the data preprocessor, but no pack transform "
                            f"follows it. Fix: end the pipeline with a pack transform whose meta_keys list '{key}'")


def _datasets(node) -> list[Mapping]:
    """The dataset configs in ``node``, wrappers' inner datasets included."""
    if not isinstance(node, Mapping):
        return []
    inner = [node.get('dataset')] + list(node.get('datasets') or [])
    return [node] + [d for child in inner for d in _datasets(child)]


def check_handover(cfg: Mapping) -> None:
    """:func:`check_pipeline` on every dataset pipeline of the config's data loaders."""
    for loader in DATALOADERS:
        dataloader = cfg.get(loader)
        for dataset in _datasets(dataloader.get('dataset') if isinstance(dataloader, Mapping) else None):
            if dataset.get('pipeline'):
                check_pipeline(dataset['pipeline'], f'{loader}.dataset ({dataset.get("type")})',
                               cfg.get('default_scope'))
