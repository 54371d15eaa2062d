"""The train data pipelines of the full-size recipes measured on their own, and the DataLoader workers that feed a
GPU rate: ``max(2, ceil(HEADROOM * gpu_rate / worker_rate))``.

A worker's rate is ``images / CPU seconds`` of ``dataset[i]`` at one thread over shuffled indices after a warm-up;
CPU seconds, so that other jobs on a shared machine do not make workers look slow. The exact (reference) pipeline is
timed beside the one the config trains with and its GPU-decode variant; the data preprocessor's cost is measured
apart, on the CPU (:func:`preprocessor_seconds`) or where it runs in training (:func:`device_batch_seconds`,
:func:`loader_rate`).
"""
from __future__ import annotations

import copy
import math
import os.path as osp
import random
import statistics
import time
from dataclasses import dataclass

HEADROOM = 1.25  # workers sized for this much more than the GPU's rate
MIN_WORKERS = 2  # with one worker every slow image stalls the step
NODE_WORKERS = 13  # per GPU of an 8-GPU DGX node (14 cores each, one for the training process)
PREPROCESSOR_BATCH = 16


@dataclass(frozen=True)
class Recipe:
    """A full-size recipe: its config, the image set it reads (``layout``: 'ade20k' or 'imagenet') and
    ``gpu_rate``, images/s of one GPU to feed."""
    name: str
    config: str
    layout: str
    gpu_rate: float


# GPU rates measured on one H200 in bf16; CvT-13 takes BEiT-B fine-tuning's (it has a quarter of its FLOPs).
RECIPES = (
    Recipe('ADE20K 512 (UPerNet, EoMT, Mask2Former)', 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py',
           'ade20k', 27.0),
    Recipe('ADE20K 640 (UPerNet)', 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py', 'ade20k', 16.0),
    Recipe('ImageNet fine-tuning 224', 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py', 'imagenet',
           2547.0),
    Recipe('CvT-13 ImageNet 224', 'configs/cvt/cvt-13_8xb256-300e_in1k.py', 'imagenet', 2547.0),
    Recipe('BEiT v1 MIM 224 + 112', 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet',
           1848.0),
    Recipe('BEiT v2 MIM 224 + 224', 'configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet',
           600.0),
)


def workers_needed(gpu_rate: float, worker_rate: float, headroom: float = HEADROOM) -> int:
    """DataLoader workers per GPU to produce ``headroom * gpu_rate`` images/s at ``worker_rate`` each."""
    if worker_rate <= 0:
        raise ValueError(f'worker_rate must be positive, got {worker_rate}')
    return max(MIN_WORKERS, math.ceil(headroom * gpu_rate / worker_rate))


def load_config(config: str):
    """The config (bases merged) with the plugin's transforms registered and its registry scope set."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    import beit_mm  # noqa: F401  (registers the plugin's transforms)
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    return cfg


def pipelines(cfg) -> dict[str, list]:
    """``{'reference': train_pipeline_exact, 'new': the trained one}``, plus ``'gpu_decode'`` where the config has
    ``train_pipeline_gpu_decode``; without an exact pipeline both are the trained one."""
    used = cfg.train_dataloader.dataset.pipeline
    found = dict(reference=cfg.get('train_pipeline_exact', used), new=used)
    if cfg.get('train_pipeline_gpu_decode') is not None:
        found['gpu_decode'] = cfg.train_pipeline_gpu_decode
    return found


def build_train_dataset(cfg, data_root: str, pipeline: list | None = None):
    """The config's ``train_dataloader.dataset`` with its ``data_root`` (and, given, its ``pipeline``) replaced."""
    from mmengine.registry import DATASETS
    dataset = cfg.train_dataloader.dataset.copy()
    dataset.data_root = data_root
    if pipeline is not None:
        dataset.pipeline = pipeline
    return DATASETS.build(dataset)


def _one_thread():
    import cv2
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    return threads


def worker_rates(datasets: dict, images: int, warmup: int = 4, rounds: int = 4,
                 seed: int = 0) -> dict[str, tuple[float, float]]:
    """``{name: (images per CPU second, images per wall-clock second)}`` of ``dataset[i]`` at one thread, as one
    DataLoader worker, on the same shuffled indices; the datasets take turns in ``rounds`` rounds so that a change of
    load touches them alike."""
    import torch
    threads = _one_thread()
    try:
        length = min(len(d) for d in datasets.values())
        order = list(range(length))
        random.Random(seed).shuffle(order)
        picks = [order[i % length] for i in range(warmup + images)]
        for dataset in datasets.values():
            for i in picks[:warmup]:
                dataset[i]
        cpu, wall = dict.fromkeys(datasets, 0.0), dict.fromkeys(datasets, 0.0)
        timed = picks[warmup:]
        for r in range(rounds):
            chunk = timed[r * len(timed) // rounds:(r + 1) * len(timed) // rounds]
            for name, dataset in datasets.items():
                w, c = time.perf_counter(), time.process_time()
                for i in chunk:
                    dataset[i]
                cpu[name] += time.process_time() - c
                wall[name] += time.perf_counter() - w
        return {name: (images / cpu[name], images / wall[name]) for name in datasets}
    finally:
        torch.set_num_threads(threads)


def worker_rate(dataset, images: int, warmup: int = 4, seed: int = 0) -> tuple[float, float]:
    """:func:`worker_rates` of one dataset."""
    return worker_rates(dict(one=dataset), images, warmup, rounds=1, seed=seed)['one']


def data_preprocessor(cfg):
    """The config's ``model.data_preprocessor``, else its top-level ``data_preprocessor``, else None."""
    return cfg.model.get('data_preprocessor') or cfg.get('data_preprocessor')


def preprocessor_seconds(cfg, dataset, images: int, seed: int = 0, collate_fn: str | None = None) -> float:
    """CPU seconds per image of the config's data preprocessor at one thread, on batches of
    :data:`PREPROCESSOR_BATCH` samples of ``dataset`` made first and collated by ``collate_fn`` (default: the
    config's)."""
    import torch
    from mmengine.registry import FUNCTIONS, MODELS
    preprocessor = MODELS.build(data_preprocessor(cfg))
    if collate_fn is None:
        collate_fn = cfg.train_dataloader.get('collate_fn', dict(type='pseudo_collate'))['type']
    collate = FUNCTIONS.get(collate_fn)
    size = min(PREPROCESSOR_BATCH, images)
    rng = random.Random(seed)
    batches = [collate([dataset[rng.randrange(len(dataset))] for _ in range(size)])
               for _ in range(max(1, images // size))]
    threads = _one_thread()
    try:
        preprocessor(batches[0], True)
        cpu = time.process_time()
        for batch in batches:
            preprocessor(batch, True)
        return (time.process_time() - cpu) / (len(batches) * size)
    finally:
        torch.set_num_threads(threads)


def _synchronize(device) -> None:
    import torch
    if torch.device(device).type == 'cuda':
        torch.cuda.synchronize(device)


def device_batch_seconds(cfg, dataset, batch: int, device, batches: int = 3, collate_fn: str | None = None,
                         seed: int = 0) -> tuple[float, float | None]:
    """Wall-clock seconds per batch of the config's data preprocessor on ``device`` (median of ``batches`` after one
    untimed), and of the batched JPEG decode alone when the samples carry encoded bytes (else None)."""
    from mmengine.registry import FUNCTIONS, MODELS

    from beit_mm.data.transforms.device_views import decode_images
    preprocessor = MODELS.build(data_preprocessor(cfg)).to(device)
    if collate_fn is None:
        collate_fn = cfg.train_dataloader.get('collate_fn', dict(type='pseudo_collate'))['type']
    collate = FUNCTIONS.get(collate_fn)
    rng = random.Random(seed)
    made = [collate([dataset[rng.randrange(len(dataset))] for _ in range(batch)]) for _ in range(batches)]
    encoded = isinstance(made[0]['inputs'], list) and made[0]['inputs'][0].dim() == 1

    def timed(call) -> float:
        times = []
        for data in [made[0]] + made:
            _synchronize(device)
            start = time.perf_counter()
            call(data)
            _synchronize(device)
            times.append(time.perf_counter() - start)
        return statistics.median(times[1:])

    seconds = timed(lambda data: preprocessor(data, True))
    decode = timed(lambda data: decode_images(data['inputs'], device)) if encoded else None
    return seconds, decode


def loader_rate(cfg, data_root: str, pipeline: list, workers: int, device, batch: int,
                collate_fn: str | None = None, seed: int = 0) -> float:
    """Images/s delivered by the config's train dataloader with ``workers`` workers through the data preprocessor
    on ``device``. The clock starts after the first ``workers`` batches, which arrive together."""
    from mmengine.registry import MODELS
    from mmengine.runner import Runner
    warmup, batches = workers, max(4, 2 * workers)
    preprocessor = MODELS.build(data_preprocessor(cfg)).to(device)
    loader_cfg = copy.deepcopy(cfg.train_dataloader)
    loader_cfg.update(batch_size=batch, num_workers=workers, persistent_workers=workers > 0,
                      pin_memory=str(device).startswith('cuda'), sampler=dict(type='InfiniteSampler', shuffle=True))
    loader_cfg.dataset.data_root = data_root
    loader_cfg.dataset.pipeline = pipeline
    if collate_fn is not None:
        loader_cfg.collate_fn = dict(type=collate_fn)
    loader = Runner.build_dataloader(loader_cfg, seed=seed)
    batches_seen = iter(loader)
    for _ in range(warmup):
        preprocessor(next(batches_seen), True)
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(batches):
        preprocessor(next(batches_seen), True)
    _synchronize(device)
    elapsed = time.perf_counter() - start
    del batches_seen, loader  # the workers stop
    return batches * batch / elapsed


@dataclass(frozen=True)
class DeviceMeasurement:
    """One recipe's pipeline (``kind``: 'reference', 'new' or 'gpu_decode') on a device: seconds per batch of the
    preprocessor, the JPEG decode and the step at ``gpu_rate``, and the loader's images/s (None: not run)."""
    recipe: Recipe
    kind: str
    batch: int
    preprocessor_seconds: float
    decode_seconds: float | None
    gpu_rate: float
    workers: int
    loader_rate: float | None

    @property
    def step_seconds(self) -> float:
        return self.batch / self.gpu_rate

    @property
    def rate_with_preprocessor(self) -> float:
        """The GPU's images/s when the preprocessor runs before each step on the same device, not overlapped."""
        return self.batch / (self.step_seconds + self.preprocessor_seconds)


def measure_on_device(recipe: Recipe, config: str, data_root: str, device, gpu_rate: float, batch: int | None = None,
                      batches: int = 3, workers: int = 0, kinds: tuple[str, ...] | None = None
                      ) -> list[DeviceMeasurement]:
    """:func:`device_batch_seconds` of each of ``recipe``'s pipelines (those of ``kinds``) at ``batch`` (default:
    the config's), and with ``workers`` > 0 their :func:`loader_rate`."""
    cfg = load_config(config)
    batch = batch or cfg.train_dataloader.batch_size
    found = []
    for kind, pipeline in pipelines(cfg).items():
        if kinds is not None and kind not in kinds:
            continue
        collate = 'pseudo_collate' if kind == 'gpu_decode' else None
        dataset = build_train_dataset(cfg, data_root, pipeline)
        seconds, decode = device_batch_seconds(cfg, dataset, batch, device, batches, collate_fn=collate)
        rate = (loader_rate(cfg, data_root, pipeline, workers, device, batch, collate_fn=collate)
                if workers > 0 else None)
        found.append(DeviceMeasurement(recipe, kind, batch, seconds, decode, gpu_rate, workers, rate))
    return found


@dataclass(frozen=True)
class Measurement:
    """One recipe: images per worker CPU second of each pipeline, also with the preprocessor's CPU cost added, the
    wall-clock rates, and the GPU rate to feed."""
    recipe: Recipe
    reference: float
    new: float
    reference_with_preprocessor: float
    new_with_preprocessor: float
    reference_wall: float
    new_wall: float
    gpu_rate: float
    gpu_decode: float | None = None
    gpu_decode_preprocessor_seconds: float | None = None

    @property
    def ratio(self) -> float:
        return self.new / self.reference

    @property
    def ratio_with_preprocessor(self) -> float:
        return self.new_with_preprocessor / self.reference_with_preprocessor

    @property
    def workers_reference(self) -> int:
        return workers_needed(self.gpu_rate, self.reference)

    @property
    def workers_new(self) -> int:
        return workers_needed(self.gpu_rate, self.new)

    @property
    def workers_gpu_decode(self) -> int | None:
        return None if self.gpu_decode is None else workers_needed(self.gpu_rate, self.gpu_decode)


def measure_recipe(recipe: Recipe, config: str, data_root: str, images: int, gpu_rate: float) -> Measurement:
    """Time each pipeline of ``recipe`` on the same images, and the data preprocessor on each one's samples."""
    cfg = load_config(config)
    datasets = {kind: build_train_dataset(cfg, data_root, pipeline) for kind, pipeline in pipelines(cfg).items()}
    measured = worker_rates(datasets, images)
    rates = {kind: rate for kind, (rate, _) in measured.items()}
    with_pre, extra = {}, {}
    for kind, dataset in datasets.items():
        collate = 'pseudo_collate' if kind == 'gpu_decode' else None
        extra[kind] = (preprocessor_seconds(cfg, dataset, images, collate_fn=collate)
                       if data_preprocessor(cfg) is not None else 0.0)
        with_pre[kind] = 1.0 / (1.0 / rates[kind] + extra[kind])
    return Measurement(recipe, rates['reference'], rates['new'], with_pre['reference'], with_pre['new'],
                       measured['reference'][1], measured['new'][1], gpu_rate, rates.get('gpu_decode'),
                       extra.get('gpu_decode'))


def loader_settings(workers: int) -> dict:
    """The train dataloader keys the configs set for ``workers`` workers per GPU. ``prefetch_factor`` is left out:
    PyTorch refuses it under a ``num_workers=0`` override."""
    return dict(num_workers=workers, pin_memory=True, persistent_workers=True)


def make_image_sets(work_dir: str, ade_size: int, imagenet_size: tuple[int, int], count: int) -> dict[str, str]:
    """``{'ade20k': root, 'imagenet': root}``: ``count`` demo ADE20K images of ``ade_size``^2 px and photo-like
    ImageNet JPEGs of ``imagenet_size`` (height, width), under ``work_dir``."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    from beit_mm.data.demo.photos import make_photo_imagenet
    ade = make_demo_ade20k(osp.join(work_dir, 'ade'), num_train=count, num_val=1, size=ade_size)
    imagenet = make_photo_imagenet(osp.join(work_dir, 'imagenet_photos'), count, *imagenet_size)
    return {'ade20k': ade, 'imagenet': imagenet}
