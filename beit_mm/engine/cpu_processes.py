"""How many CPU processes a node without CUDA may run; imports only ``os`` and ``torch``."""
import os

import torch


class TooManyCPUProcessesError(RuntimeError):
    """A run without CUDA asked for more processes on one node than the CPU cores this process may use."""


def check_cpu_processes(nproc_per_node: int) -> None:
    """Refuse more CPU processes than usable cores on a node without CUDA; a no-op with CUDA.

    Raises:
        TooManyCPUProcessesError: with the counts and the command that fits.
    """
    if torch.cuda.is_available():
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
    if nproc_per_node > cores:
        raise TooManyCPUProcessesError(
            f'{nproc_per_node} processes asked for on a node without CUDA, which has {cores} usable CPU core(s): '
            f'the processes would share {cores} core(s) and each step would run several times slower than one '
            f'process; nothing was started. Fix: ask for at most {cores} (bash tools/dist_train.sh CONFIG {cores}), '
            'or run on a node with GPUs.')
