"""Checkpoints carry every process's generator states and a resume restores them, so that a killed and resumed run
with dropout or drop path ends with the same weights as an uninterrupted one.

States are saved before ``CheckpointHook`` saves, restored when the run really resumes (after an
``IterBasedTrainLoop`` replays its finished batches), and left untouched by validation. The sampler and workers are
seeded from ``randomness.seed``, which :func:`use_rng_state_hook` sets to the checkpoint's beforehand.
"""
from __future__ import annotations

import logging
import os
import os.path as osp
import random
from collections.abc import Iterator

import numpy as np
import torch
from mmengine.config import Config
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log

from ...fileio import open_checkpoint
from ...registry import HOOKS
from ..resume.counters import check_seed

from .atomic_checkpoint import ensure_custom_hook

RNG_STATES_KEY = 'rng_states'


def capture_rng_state() -> dict:
    """This process's generator states as plain tensors and numbers (readable with ``weights_only=True``).

    Returns:
        dict: ``torch``, ``cuda`` (None without CUDA), ``numpy`` and ``python`` states.
    """
    _, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    version, words, gauss_next = random.getstate()
    return dict(
        torch=torch.get_rng_state(),
        cuda=torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
        numpy=dict(keys=torch.from_numpy(keys.astype(np.int64)), pos=int(pos), has_gauss=int(has_gauss),
                   cached_gaussian=float(cached_gaussian)),
        python=dict(version=int(version), state=torch.tensor(words, dtype=torch.int64), gauss_next=gauss_next))


def restore_rng_state(state: dict) -> None:
    """Set this process's generators to ``state`` (from :func:`capture_rng_state`)."""
    torch.set_rng_state(state['torch'])
    if state.get('cuda') is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'])
    np_state = state['numpy']
    np.random.set_state(('MT19937', np_state['keys'].numpy().astype(np.uint32), np_state['pos'],
                         np_state['has_gauss'], np_state['cached_gaussian']))
    py_state = state['python']
    random.setstate((py_state['version'], tuple(py_state['state'].tolist()), py_state['gauss_next']))


def _checkpoint_due(runner, by_epoch: bool) -> bool:
    """Whether a ``CheckpointHook`` of the runner saves in this ``after_train_iter`` (``by_epoch=False``) or
    ``after_train_epoch`` (``by_epoch=True``): the conditions of MMEngine 0.10.7's hook."""
    for hook in runner.hooks:
        if not isinstance(hook, CheckpointHook) or hook.by_epoch != by_epoch:
            continue
        if by_epoch and (hook.every_n_epochs(runner, hook.interval, hook.save_begin)
                         or (hook.save_last and hook.is_last_train_epoch(runner))):
            return True
        if not by_epoch and (hook.every_n_train_iters(runner, hook.interval, hook.save_begin)
                             or (hook.save_last and hook.is_last_train_iter(runner))):
            return True
    return False


class _RestoreAfterReplay:
    """Stands in for ``IterBasedTrainLoop.dataloader_iterator``: passes ``replayed`` batches through (MMEngine's
    replay of the finished iterations), then sets the generators to ``state`` before loading the next batch and puts
    the loop's own iterator back."""

    def __init__(self, loop, replayed: int, state: dict) -> None:
        self._loop = loop
        self._iterator = loop.dataloader_iterator
        self._left = replayed
        self._state = state

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        if self._left > 0:
            self._left -= 1
            return next(self._iterator)
        restore_rng_state(self._state)
        self._loop.dataloader_iterator = self._iterator
        return next(self._iterator)


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save every process's generator states in checkpoints and restore them on resume."""

    priority = 'LOW'  # before CheckpointHook (VERY_LOW)

    def __init__(self) -> None:
        self._gathered: tuple[tuple[int, int], list] | None = None
        self._loaded: dict | None = None
        self._before_val: dict | None = None

    def _gather(self, runner) -> None:
        self._gathered = ((runner.epoch, runner.iter), all_gather_object(capture_rng_state()))

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if get_world_size() > 1 and _checkpoint_due(runner, by_epoch=False):
            self._gather(runner)

    def after_train_epoch(self, runner) -> None:
        if get_world_size() > 1 and _checkpoint_due(runner, by_epoch=True):
            self._gather(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        world_size = get_world_size()
        if world_size == 1:
            states = [capture_rng_state()]
        elif self._gathered is not None and self._gathered[0] == (runner.epoch, runner.iter):
            states = self._gathered[1]
        else:  # a save this hook did not foresee: only rank 0's states (this process) are known
            states = [capture_rng_state()] + [None] * (world_size - 1)
        checkpoint[RNG_STATES_KEY] = states

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.get('meta') or {}
        self._loaded = dict(iter=meta.get('iter'), states=checkpoint.get(RNG_STATES_KEY))

    def before_train(self, runner) -> None:
        loaded, self._loaded = self._loaded, None
        if loaded is None or not runner.iter or loaded['iter'] != runner.iter:
            return  # a new run, or weights loaded with load_from: the seed decides
        states, rank, world_size = loaded['states'], get_rank(), get_world_size()
        if states is None:
            runner.logger.warning(
                'the resumed checkpoint holds no random generator states (written without beit_mm.RNGStateHook): '
                'from here dropout/drop-path masks differ from those of an uninterrupted run')
            return
        if len(states) != world_size or states[rank] is None:
            runner.logger.warning(
                f'the resumed checkpoint holds the random generator states of {len(states)} processes '
                f'({sum(s is not None for s in states)} known), this run has {world_size}: rank {rank} keeps its '
                'seeded generators, so dropout/drop-path masks differ from those of an uninterrupted run')
            return
        loop = runner.train_loop
        if hasattr(loop, 'dataloader_iterator'):  # IterBasedTrainLoop: after the replay of the finished batches
            loop.dataloader_iterator = _RestoreAfterReplay(loop, runner.iter, states[rank])
        else:
            restore_rng_state(states[rank])
        runner.logger.info(f'random generator states of iteration {runner.iter} restored (rank {rank})')

    def before_val(self, runner) -> None:
        self._before_val = capture_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            restore_rng_state(self._before_val)
            self._before_val = None


def checkpoint_seed(path: str) -> int | None:
    """The run seed in a local checkpoint's ``meta``, or None.

    Raises:
        TrainingStateError: a seed numpy would refuse.
    """
    if not osp.isfile(path):
        return None
    checkpoint = open_checkpoint(path)
    seed = (checkpoint.get('meta') or {}).get('seed') if isinstance(checkpoint, dict) else None
    check_seed(seed, path)
    return int(seed) if seed is not None else None


def use_rng_state_hook(cfg: Config, opened: dict | None = None) -> None:
    """Add ``beit_mm.RNGStateHook`` to ``cfg.custom_hooks``; when the config resumes, set ``randomness.seed`` to the
    checkpoint's (``opened``, else read from ``cfg.load_from``)."""
    ensure_custom_hook(cfg, RNGStateHook, 'beit_mm.RNGStateHook')
    if not (cfg.get('resume') and cfg.get('load_from')):
        return
    if opened is not None:
        seed = (opened.get('meta') or {}).get('seed')
        check_seed(seed, cfg.load_from)
        seed = int(seed) if seed is not None else None
    else:
        seed = checkpoint_seed(cfg.load_from)
    randomness = dict(cfg.get('randomness') or {})
    if seed is not None and randomness.get('seed') != seed:
        if randomness.get('seed') is not None and os.environ.get('RANK', '0') == '0':
            print_log(f'--resume: randomness.seed {randomness["seed"]} -> {seed}, the seed of {cfg.load_from}, so that '
                      'the data order and augmentations continue those of the interrupted run', logger='current',
                      level=logging.WARNING)
        randomness['seed'] = seed
        cfg.randomness = randomness
