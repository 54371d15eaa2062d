"""How many CPU processes a node without CUDA may run; imports only ``os`` and ``torch``, so that a launcher can run it
from its file before starting any process."""
import os

import torch


class TooManyCPUProcessesError(RuntimeError):
    """A run without CUDA asked for more processes on one node than the CPU cores this process may use."""


def check_cpu_processes(nproc_per_node: int) -> None:
    """Refuse ``nproc_per_node`` CPU processes on a node without CUDA that has fewer usable cores (the process's
    CPU affinity) than that; a no-op with CUDA.

    Raises:
        TooManyCPUProcessesError: with the counts and the command that fits.

    Processes sharing too few cores run each step several times slower than one process, without a word.
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
