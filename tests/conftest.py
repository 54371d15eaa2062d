import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import beit_mm  # noqa: E402,F401  (registers the plugin)

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def randomize_(module: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
    """Fill every parameter and float buffer with random values (weights from zero-initialized tables too), so a
    parity test exercises every tensor."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if not t.is_floating_point():
                continue
            if name.endswith('running_var'):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            elif name.endswith(('weight', 'lambda_1', 'lambda_2', 'gamma_1', 'gamma_2')) and t.dim() == 1:
                t.copy_(1 + std * torch.randn(t.shape, generator=g))
            else:
                t.copy_(std * torch.randn(t.shape, generator=g))
    return module


# Two float32 kernels that compute the same sums in another order (eager vs SDPA, PyTorch vs onnxruntime, AVX2 vs
# AVX512 code paths) differ by a few units in the last place of the largest value: float32's unit roundoff is
# 6e-8, and the largest seen between the attention kernels was 1.5e-7 of the tensor's magnitude (gradients ~100,
# AMD EPYC with AVX2 only). 1e-5 of the magnitude leaves ~60x headroom; a real error (a bias added twice, a wrong
# scale) is of the order of the values themselves.
FP32_KERNEL_RTOL = 1e-5


def assert_close_to_scale(got: torch.Tensor, ref: torch.Tensor, rtol: float = FP32_KERNEL_RTOL, what: str = ''):
    """``max |got - ref| <= rtol * max(|ref|.max(), 1)``: float32 agreement relative to the tensor's magnitude (an
    absolute bound for values below 1), independent of which CPU kernels computed it."""
    scale = max(float(ref.abs().max()), 1.0)
    diff = float((got - ref).abs().max())
    assert diff <= rtol * scale, f'{what}: max |diff| {diff:.3e} > {rtol:g} x {scale:.3e}'


def shrink_seg_config(cfg, data_root: str, checkpoint: str, work_dir: str, crop: int = 64):
    """Override only the sizes of a full-size segmentation config so it trains 2 iterations on tiny data: crops, test
    scales, slide windows, iterations, workers, 2 images per batch (batch 1 per GPU relies on SyncBN over 8 GPUs; BN's
    pooled 1x1 features need 2 images on one process); plus ``data_root`` and the backbone checkpoint path."""
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[loader]
        dl.num_workers = 0
        dl.persistent_workers = False
        dl.dataset.data_root = data_root
        for t in dl.dataset.pipeline:
            if t.type in ('RandomResize', 'Resize'):
                t.scale = (4 * crop, crop)
            if t.type == 'RandomCrop':
                t.crop_size = (crop, crop)
    cfg.train_dataloader.batch_size = 2
    cfg.model.data_preprocessor.size = (crop, crop)
    if 'img_size' in cfg.model.backbone:
        cfg.model.backbone.img_size = crop
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    if cfg.model.test_cfg.get('mode') == 'slide':
        cfg.model.test_cfg.crop_size = (crop, crop)
        cfg.model.test_cfg.stride = (crop * 2 // 3, ) * 2
    cfg.train_cfg.max_iters = 2
    cfg.train_cfg.val_interval = 2
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    return cfg


def shrink_imagenet_loaders(cfg, data_root: str, size: int) -> None:
    """An ImageNet classification config's train/val/test loaders on a tiny ImageNet-layout folder at ``size`` px:
    batch 2, no workers, crops and resizes scaled as the config's 224/256 (``ResizeEdge`` at size * 8 / 7)."""
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[name]
        dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 2
        dl.dataset.data_root = data_root
        for t in dl.dataset.pipeline:
            if t.type == 'RandomResizedCrop':
                t.scale = size
            elif t.type == 'ResizeEdge':
                t.scale = size * 8 // 7
            elif t.type == 'CenterCrop':
                t.crop_size = size


@pytest.fixture(autouse=True)
def _isolated_default_scope():
    """Each test starts without an MMEngine default scope (a test that calls ``init_default_scope('mmseg')`` would
    otherwise change how later tests resolve unscoped registry names)."""
    from mmengine.registry import DefaultScope
    DefaultScope._instance_dict.clear()
    yield
    DefaultScope._instance_dict.clear()
