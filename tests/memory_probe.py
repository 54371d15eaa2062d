"""Test helper: a hook printing per rank, at the end of training, the parameter and optimizer-state elements held and
the peak RSS, for tests/engine/test_fsdp.py (``custom_imports=['tests.memory_probe']``, ``MemoryProbeHook``)."""
import resource

import torch
import torch.distributed as dist
from mmengine.hooks import Hook

from beit_mm.registry import HOOKS


@HOOKS.register_module()
class MemoryProbeHook(Hook):
    priority = 'LOWEST'

    def after_train(self, runner) -> None:
        params = sum(p.numel() for p in runner.model.parameters())
        optimizer = runner.optim_wrapper.optimizer
        state = sum(t.numel() for s in optimizer.state.values() for t in s.values()
                    if torch.is_tensor(t) and t.dim() > 0)
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rank = dist.get_rank() if dist.is_initialized() else 0
        print(f'memory-probe rank={rank} params={params} optim_state={state} peak_rss_mib={rss_mib:.0f}', flush=True)
