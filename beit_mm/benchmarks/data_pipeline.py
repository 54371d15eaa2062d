"""The train data pipelines of the full-size recipes measured on their own: images/s of one DataLoader worker
(one process, one thread, as a worker runs: torch and OpenCV at 1 thread) through the config's own train dataset
and pipeline, and from it the workers that feed a GPU rate. ``tools/analysis/benchmark_data.py`` is the CLI.

A worker's rate is ``images / CPU seconds`` of ``dataset[i]`` over shuffled indices after a warm-up (decode, the
augmentations, packing; the batch collate and the GPU-side normalization are left out: both are small next to the
decode); CPU seconds, not wall-clock ones, so that other jobs on a shared machine do not make workers look slower
than a worker with a core of its own is. Workers needed per GPU = ``max(2, ceil(HEADROOM * gpu_rate /
worker_rate))``: 25% headroom for the main process, JPEGs larger than the demo's and a busy node.
"""
from __future__ import annotations

import math
import os.path as osp
import random
import time
from dataclasses import dataclass

# Workers are sized for this much more than the GPU's rate (see the module docstring).
HEADROOM = 1.25
# Never fewer: with one worker every slow image (a large JPEG, a rare augmentation) stalls the step.
MIN_WORKERS = 2


@dataclass(frozen=True)
class Recipe:
    """A full-size recipe's train pipeline: ``config`` (relative to the checkout), the demo ``layout`` its dataset
    reads ('ade20k' or 'imagenet'), and ``gpu_rate``, images/s of one GPU to feed by default."""
    name: str
    config: str
    layout: str
    gpu_rate: float


# Default GPU rates: the beit_mm rows of docs/studies/gpu-report-h200.md (bf16 autocast, 2026-11-26, batch 32 / 2,
# rounded up); pass the rates a GPU session measures at the recipe batch (benchmark.py) with --gpu-rate.
RECIPES = (
    Recipe('ADE20K 512 (UPerNet, EoMT, Mask2Former)', 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py',
           'ade20k', 27.0),
    Recipe('ADE20K 640 (UPerNet)', 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py', 'ade20k', 16.0),
    Recipe('ImageNet fine-tuning 224', 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py', 'imagenet',
           800.0),
    Recipe('BEiT v1 MIM 224 + 112', 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet',
           790.0),
    Recipe('BEiT v2 MIM 224 + 224', 'configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet',
           600.0),
)


def workers_needed(gpu_rate: float, worker_rate: float, headroom: float = HEADROOM) -> int:
    """DataLoader workers per GPU to produce ``headroom * gpu_rate`` images/s at ``worker_rate`` each, at least
    :data:`MIN_WORKERS`."""
    if worker_rate <= 0:
        raise ValueError(f'worker_rate must be positive, got {worker_rate}')
    return max(MIN_WORKERS, math.ceil(headroom * gpu_rate / worker_rate))


def build_train_dataset(config: str, data_root: str):
    """The config's ``train_dataloader.dataset`` with its ``data_root`` replaced (and an mmpretrain ``ImageNet``'s
    annotation file left to its split), built in the config's registry scope."""
    from mmengine.config import Config
    from mmengine.registry import DATASETS, init_default_scope

    import beit_mm  # noqa: F401  (registers the plugin's transforms)
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    dataset = cfg.train_dataloader.dataset
    dataset.data_root = data_root
    return DATASETS.build(dataset)


def worker_rate(dataset, images: int, warmup: int = 4, seed: int = 0) -> tuple[float, float]:
    """``(images per CPU second, images per wall-clock second)`` of ``dataset[i]`` in this process at one thread
    (torch and OpenCV), as one DataLoader worker. The CPU-second rate is what a worker with a core of its own
    gives (it does not fall when other jobs share the cores); the wall-clock rate is what it gave here."""
    import cv2
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    try:
        order = list(range(len(dataset)))
        random.Random(seed).shuffle(order)
        picks = [order[i % len(order)] for i in range(warmup + images)]
        for i in picks[:warmup]:
            dataset[i]
        wall, cpu = time.perf_counter(), time.process_time()
        for i in picks[warmup:]:
            dataset[i]
        return images / (time.process_time() - cpu), images / (time.perf_counter() - wall)
    finally:
        torch.set_num_threads(threads)


def loader_settings(workers: int) -> dict:
    """The train dataloader keys set in the configs for ``workers`` workers per GPU: pinned host memory (asynchronous
    host-to-device copies), workers kept across epochs (no re-fork and re-import per epoch). ``prefetch_factor`` stays
    PyTorch's default, 2 batches in flight per worker (enough when the workers keep up; a config that names it breaks
    every ``num_workers=0`` override: PyTorch refuses a prefetch factor without workers)."""
    return dict(num_workers=workers, pin_memory=True, persistent_workers=True)


def make_demo_sets(work_dir: str, ade_size: int, imagenet_size: int, count: int) -> dict[str, str]:
    """Demo sets in the real layouts under ``work_dir`` (``tools/make_demo_data.py``'s generators): ADE20K with
    ``count`` training images of ``ade_size``^2 px, ImageNet (with ``meta/train.txt``) with ``count`` images over 4
    classes of ``imagenet_size``^2 px, JPEG quality 90. ``{'ade20k': root, 'imagenet': root}``."""
    from beit_mm.data.demo import make_demo_ade20k
    from beit_mm.data.demo_imagenet import make_demo_imagenet
    ade = make_demo_ade20k(osp.join(work_dir, 'ade'), num_train=count, num_val=1, size=ade_size)
    imagenet = make_demo_imagenet(osp.join(work_dir, 'imagenet'), num_classes=4, per_class_train=max(1, count // 4),
                                  per_class_val=1, size=imagenet_size, ann_files=True)
    return {'ade20k': ade, 'imagenet': imagenet}
