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


@pytest.fixture(autouse=True)
def _isolated_default_scope():
    """Each test starts without an MMEngine default scope (a test that calls ``init_default_scope('mmseg')`` would
    otherwise change how later tests resolve unscoped registry names)."""
    from mmengine.registry import DefaultScope
    DefaultScope._instance_dict.clear()
    yield
    DefaultScope._instance_dict.clear()
