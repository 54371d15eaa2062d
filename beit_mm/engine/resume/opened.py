"""A checkpoint the start checks already read, given once to the run's MMEngine load instead of a second read, while
the file is unchanged."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mmengine._strategy import SingleDeviceStrategy
from mmengine.model import is_model_wrapper
from mmengine.runner import FlexibleRunner, Runner
from mmengine.runner.checkpoint import _load_checkpoint_to_model

from ...fileio.checkpoint import file_identity

_REVISE_KEYS = ((r'^module.', ''), )


@dataclass
class OpenedCheckpoint:
    """What the file ``path`` held when read, and its ``identity`` taken before reading (None matches nothing)."""
    path: str
    identity: tuple | None
    checkpoint: dict = field(repr=False)

    def take(self, filename: str) -> dict | None:
        """The checkpoint, once, when ``filename`` is the unchanged file it was read from; else None."""
        if self.checkpoint is None or self.identity is None:
            return None
        try:
            if file_identity(filename) != self.identity:
                return None
        except OSError:
            return None
        checkpoint, self.checkpoint = self.checkpoint, None
        return checkpoint


def identity_or_none(path: str) -> tuple | None:
    """:func:`beit_mm.fileio.checkpoint.file_identity` of ``path``, None where it cannot be taken (the reader names
    the problem)."""
    try:
        return file_identity(path)
    except OSError:
        return None


def give_to_runner(runner: Runner | FlexibleRunner, opened: OpenedCheckpoint) -> None:
    """Make ``runner``'s next load of ``opened.path`` take ``opened.checkpoint`` (once, the file unchanged); every
    other load of this runner reads its file as MMEngine does (through :mod:`beit_mm.fileio`). Runners of other
    strategies (DeepSpeed, ColossalAI: folders, not files) are left as they are."""
    if isinstance(runner, FlexibleRunner):
        if isinstance(runner.strategy, SingleDeviceStrategy):  # also DDPStrategy and FSDPStrategy
            runner.strategy.load_checkpoint = _strategy_load(runner.strategy, opened)
    else:
        runner.load_checkpoint = _runner_load(runner, opened)


def _runner_load(runner: Runner, opened: OpenedCheckpoint) -> Callable:
    read = runner.load_checkpoint

    def load_checkpoint(filename: str, map_location='cpu', strict: bool = False, revise_keys=_REVISE_KEYS):
        checkpoint = opened.take(filename)
        if checkpoint is None:
            return read(filename, map_location=map_location, strict=strict, revise_keys=list(revise_keys))
        runner.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        checkpoint = _load_checkpoint_to_model(model, checkpoint, strict, revise_keys=list(revise_keys))
        runner._has_loaded = True
        runner.logger.info(f'Load checkpoint from {filename} (read once, by the checks before the run)')
        return checkpoint

    return load_checkpoint


def _strategy_load(strategy: SingleDeviceStrategy, opened: OpenedCheckpoint) -> Callable:
    read = strategy.load_checkpoint

    def load_checkpoint(filename: str, *, map_location='cpu', strict: bool = False, revise_keys=_REVISE_KEYS,
                        callback: Callable | None = None):
        checkpoint = opened.take(filename)
        if checkpoint is None:
            return read(filename, map_location=map_location, strict=strict, revise_keys=list(revise_keys),
                        callback=callback)
        strategy.logger.info(f'Load checkpoint from {filename} (read once, by the checks before the run)')
        if callback is not None:
            callback(checkpoint)
        strategy.load_model_state_dict(checkpoint.pop('state_dict'), strict=strict, revise_keys=list(revise_keys))
        return checkpoint

    return load_checkpoint
