"""Make one config run under every launcher: single process, torchrun/slurm on GPUs, and torchrun on CPU.

1. Configs write the distributed recipe: ``norm_cfg=dict(type='SyncBN')`` and ``env_cfg.dist_cfg.backend='nccl'``.
2. Single process (``launcher='none'``): nothing to do here. MMEngine's ``Runner.wrap_model`` reverts every SyncBN to
   BN when the run is not distributed (``mmengine.model.revert_sync_batchnorm``), before the optimizer is built.
3. Distributed with CUDA: the config is used as written.
4. Distributed without CUDA (torchrun on CPU): PyTorch's SyncBatchNorm only runs on accelerators and NCCL needs GPUs,
   and MMEngine's ``init_dist`` calls ``torch.cuda.set_device`` and wraps the model with ``device_ids=[LOCAL_RANK]``.
   :func:`adapt_cfg_to_launcher` switches the backend to ``gloo``, SyncBN/MMSyncBN to BN and the DDP wrapper to
   ``device_ids=None``; :func:`init_cpu_process_group` creates the process group from torchrun's environment so that
   the Runner does not call ``init_dist``. Each change is logged.
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

# the classes of mmcv's 'SyncBN' and 'MMSyncBN' norm layers (any name registered for them, or a subclass)
_SYNC_BN_CLASSES = (torch.nn.SyncBatchNorm, MMSyncBatchNorm)


def _sync_bn_to_bn(node: Any) -> int:
    """Replace ``type='SyncBN'``/``'MMSyncBN'`` (or another name of those classes) by ``'BN'`` in every ``norm_cfg`` dict under ``node``, in place.

    Returns:
        int: the number of norm configs changed.
    """
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
    """Set ``cfg.launcher`` and apply rule 4 of this module when ``launcher != 'none'`` and CUDA is unavailable.

    Args:
        cfg (Config): the full run config; changed in place.
        launcher (str): ``'none'``, ``'pytorch'``, ``'slurm'`` or ``'mpi'``.

    Returns:
        Config: ``cfg``.
    """
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


#: the store key counting this launch's process groups (each rank adds 1 per group it creates)
PROCESS_GROUP_COUNT_KEY = 'beit_mm/process_groups'


def init_cpu_process_group(launcher: str, dist_cfg: dict) -> None:
    """Create the default process group of a CPU run started by torchrun (``RANK``, ``WORLD_SIZE``, ``MASTER_*``);
    a no-op with CUDA (MMEngine does it), for ``launcher == 'none'`` or when a group exists.

    Args:
        launcher (str): the launcher; only ``'pytorch'`` is supported without CUDA.
        dist_cfg (dict): ``env_cfg.dist_cfg``: ``backend`` and optional ``timeout`` in seconds.

    Each group of a launch gets its own store keys (``beit_mm/<n>/``, counted under :data:`PROCESS_GROUP_COUNT_KEY`):
    torch names every default group ``default_pg/0`` again while torchrun's store outlives it, so a second run in the
    same processes would read the first one's gloo addresses.
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
    """Whether this process speaks for the run: rank 0 of a launched run (torchrun/slurm set ``RANK`` before any
    process group exists), or a single process."""
    return os.environ.get('RANK', '0') == '0'


def destroy_process_group() -> None:
    """Tear the default process group down for good, after the last reference to the Runner is dropped: a barrier,
    ``gc.collect()`` (the Runner's reference cycles hold the DDP reducer, which holds the gloo group), then
    ``destroy_process_group``, which joins the gloo threads here.

    Left to interpreter finalization, a gloo thread releasing a tensor must take the GIL of a dying interpreter: a
    finished 2-process CPU run aborted there (exit code -6).
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        gc.collect()
        torch_dist.destroy_process_group()
