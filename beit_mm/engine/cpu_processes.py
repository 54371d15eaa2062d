"""How many CPU processes a node without CUDA may run.

This module imports only ``os`` and ``torch``: a launcher runs it from its file, without importing the package (whose
registrations import mmengine, mmseg, mmdet and mmpretrain: ~15 s on a slow CPU), before it starts any process.
"""
import os

import torch


class TooManyCPUProcessesError(RuntimeError):
    """A run without CUDA asked for more processes on one node than the CPU cores this process may use."""


def check_cpu_processes(nproc_per_node: int) -> None:
    """Refuse ``nproc_per_node`` CPU processes on a node without CUDA that has fewer usable cores than that.

    Eight gloo processes launched on a 2-core machine share 2 cores: each step is several times slower than one
    process, and nothing said so (the demo's eta became 2.5 hours). The count of usable
    cores is the process's CPU affinity (``os.sched_getaffinity``; what a container or ``taskset`` leaves), not the
    machine's. A no-op when CUDA is available: there the number is GPUs.

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
