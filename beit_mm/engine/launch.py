"""Make one config run under every launcher: single process, torchrun/slurm on GPUs, and torchrun on CPU.

Configs write the distributed GPU recipe (SyncBN, NCCL); without CUDA a launched run switches to gloo, BN and a DDP
wrapper without ``device_ids``, and creates its process group itself (MMEngine's ``init_dist`` needs CUDA).
"""
import gc
import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as torch_dist
from mmcv.ops import SyncBatchNorm as MMSyncBatchNorm
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import MODELS

from ..registry import config_type_is
from .cpu_processes import TooManyCPUProcessesError, check_cpu_processes  # noqa: F401

_SYNC_BN_CLASSES = (torch.nn.SyncBatchNorm, MMSyncBatchNorm)


def _sync_bn_to_bn(node: Any) -> int:
    """Replace every SyncBN/MMSyncBN ``norm_cfg`` type under ``node`` by ``'BN'``, in place; returns how many."""
    changed = 0
    if isinstance(node, dict):
        norm_cfg = node.get('norm_cfg')
        if isinstance(norm_cfg, dict) and config_type_is(norm_cfg.get('type'), _SYNC_BN_CLASSES, MODELS):
            norm_cfg['type'] = 'BN'
            changed += 1
        for key, value in node.items():
            if key != 'norm_cfg':
                changed += _sync_bn_to_bn(value)
    elif isinstance(node, (list, tuple)):
        changed += sum(_sync_bn_to_bn(value) for value in node)
    return changed


def adapt_cfg_to_launcher(cfg: Config, launcher: str) -> Config:
    """Set ``cfg.launcher`` (``'none'``, ``'pytorch'``, ``'slurm'``, ``'mpi'``); for a launched run without CUDA
    switch ``cfg`` in place to gloo, BN and ``device_ids=None``. Returns ``cfg``."""
    cfg.launcher = launcher
    if launcher == 'none' or torch.cuda.is_available():
        return cfg
    env_cfg = cfg.setdefault('env_cfg', {})
    dist_cfg = env_cfg.setdefault('dist_cfg', {})
    if dist_cfg.get('backend', 'nccl') != 'gloo':
        print_log(f"CUDA is not available: env_cfg.dist_cfg.backend {dist_cfg.get('backend', 'nccl')!r} -> 'gloo'",
                  logger='current')
        dist_cfg['backend'] = 'gloo'
    n_bn = _sync_bn_to_bn(cfg.model)
    if n_bn:
        print_log(f'CUDA is not available: {n_bn} SyncBN norm_cfg(s) in cfg.model -> BN (SyncBatchNorm needs GPUs)',
                  logger='current')
    wrapper_cfg = cfg.get('model_wrapper_cfg') or dict(
        type='MMDistributedDataParallel',
        broadcast_buffers=False,
        find_unused_parameters=cfg.get('find_unused_parameters', False))
    wrapper_cfg.setdefault('device_ids', None)
    cfg.model_wrapper_cfg = wrapper_cfg
    return cfg


PROCESS_GROUP_COUNT_KEY = 'beit_mm/process_groups'


def init_cpu_process_group(launcher: str, dist_cfg: dict) -> None:
    """Create the default process group of a CPU run started by torchrun; a no-op with CUDA, ``launcher == 'none'``
    or an existing group.

    Args:
        launcher (str): the launcher; only ``'pytorch'`` is supported without CUDA.
        dist_cfg (dict): ``env_cfg.dist_cfg``: ``backend`` and optional ``timeout`` in seconds.

    Each group gets its own store prefix: torch names every default group ``default_pg/0`` while torchrun's store
    outlives it, so a second run in the same processes would read the first one's addresses.
    """
    if launcher == 'none' or torch.cuda.is_available() or torch_dist.is_initialized():
        return
    if launcher != 'pytorch':
        raise RuntimeError(f'launcher {launcher!r} without CUDA is not supported: start CPU runs with torchrun '
                           '(tools/dist_train.sh or `torchrun --nproc_per_node N tools/train.py CONFIG --launcher '
                           'pytorch`).')
    kwargs = {}
    if dist_cfg.get('timeout') is not None:
        kwargs['timeout'] = timedelta(seconds=dist_cfg['timeout'])
    store, rank, world_size = next(torch_dist.rendezvous(
        'env://', int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), **kwargs))
    # every rank adds 1 per group; init_process_group waits for all ranks, so one group's adds precede the next's
    number = (store.add(PROCESS_GROUP_COUNT_KEY, 1) - 1) // world_size
    torch_dist.init_process_group(
        backend=dist_cfg.get('backend', 'gloo'),
        store=torch_dist.PrefixStore(f'beit_mm/{number}', store),
        rank=rank,
        world_size=world_size,
        **kwargs)


def is_rank_zero() -> bool:
    """Whether this process is rank 0 of a launched run (``RANK``), or a single process."""
    return os.environ.get('RANK', '0') == '0'


def destroy_process_group() -> None:
    """Tear the default process group down: a barrier, ``gc.collect()``, then ``destroy_process_group``.

    Left to interpreter finalization, a gloo thread may take the GIL of a dying interpreter and abort the run.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        gc.collect()
        torch_dist.destroy_process_group()
