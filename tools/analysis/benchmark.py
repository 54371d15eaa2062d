"""Train-step throughput and peak memory of beit_mm models next to their peers, in one process and one dtype.

    python tools/analysis/benchmark.py --model beit [--amp] [--batch-size 8] [--img-size 224] [--iters 10]
    python tools/analysis/benchmark.py --model cvt  [--amp]

Peers: ``beit`` -> beit_mm ``BEiT`` (base) vs mmseg 1.2.2 ``BEiT`` (base); ``cvt`` -> beit_mm ``CvT`` (cvt-13) vs
HF transformers ``CvtModel``. A train step is forward, a loss over all returned maps, backward and an AdamW step.
``--amp`` runs under ``torch.autocast`` with bf16 where the device supports it (fp16 otherwise on CUDA). Peak memory:
``torch.cuda.max_memory_allocated`` on CUDA; on CPU the peak resident-set growth from before the model is built,
sampled every 2 ms.
Prints img/s, peak memory and the beit_mm / peer ratios. Nothing here is asserted by tests.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import os
import sys
import threading
import time
from collections.abc import Callable

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def beit_peers(img_size: int) -> dict[str, Callable[[], nn.Module]]:
    from mmseg.models.backbones import BEiT as MMSegBEiT

    from beit_mm.models.backbones import BEiT

    return {
        'beit_mm BEiT-B': lambda: BEiT(arch='base', img_size=img_size, drop_path_rate=0.1, out_indices=(3, 5, 7, 11)),
        'mmseg BEiT-B': lambda: MMSegBEiT(img_size=img_size, embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4,
                                          qv_bias=True, drop_path_rate=0.1, init_values=0.1, out_indices=(3, 5, 7, 11),
                                          norm_cfg=dict(type='LN', eps=1e-6)),
    }


def cvt_peers(img_size: int) -> dict[str, Callable[[], nn.Module]]:
    from transformers import CvtConfig, CvtModel

    from beit_mm.models.backbones import CvT

    class HFCvt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = CvtModel(CvtConfig(drop_path_rate=[0.0, 0.0, 0.1]), add_pooling_layer=False)

        def forward(self, x):
            out = self.model(x, output_hidden_states=True)
            return tuple(out.hidden_states) + (out.cls_token_value, )

    return {'beit_mm CvT-13': lambda: CvT(arch='cvt-13', act='gelu', out_indices=(0, 1, 2)), 'HF CvtModel-13': HFCvt}


PEERS = {'beit': beit_peers, 'cvt': cvt_peers}


class RssPeak:
    """Peak resident-set growth of this process while inside the context (CPU memory estimate)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()

    @staticmethod
    def rss() -> int:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')

    def __enter__(self) -> 'RssPeak':
        self.base = self.rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss() - self.base)
            time.sleep(0.002)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def release_memory(device: torch.device) -> None:
    """Return freed memory to the OS (glibc ``malloc_trim``) so the next peer's RSS growth starts from scratch."""
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    else:
        ctypes.CDLL(ctypes.util.find_library('c')).malloc_trim(0)


def amp_dtype(device: torch.device) -> torch.dtype:
    if device.type == 'cuda':
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16


def bench(build: Callable[[], nn.Module], args: argparse.Namespace, device: torch.device) -> tuple[float, float]:
    """(images per second, peak memory in MiB) of ``args.iters`` timed train steps after ``args.warmup``.

    Peak memory covers the model, its gradients and optimizer state and the activations: CUDA's peak allocation, or on
    CPU the peak resident-set growth from before the model is built."""
    release_memory(device)
    with RssPeak() as rss:
        torch.manual_seed(0)
        model = build().to(device)
        model.train()  # (mmseg's BEiT.train() returns None: no chaining)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
        scaler = torch.amp.GradScaler(enabled=args.amp and amp_dtype(device) == torch.float16)

        def step() -> None:
            with torch.autocast(device.type, dtype=amp_dtype(device), enabled=args.amp):
                outs = model(x)
                loss = sum(o.float().square().mean() for o in outs if torch.is_tensor(o))
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        def sync() -> None:
            if device.type == 'cuda':
                torch.cuda.synchronize()

        for _ in range(args.warmup):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(args.iters):
            step()
        sync()
        elapsed = time.perf_counter() - start
        del model, opt, x
    peak = torch.cuda.max_memory_allocated() if device.type == 'cuda' else rss.peak
    return args.batch_size * args.iters / elapsed, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--model', choices=sorted(PEERS), default='beit')
    parser.add_argument('--amp', action='store_true', help='bf16 autocast (fp16 on CUDA devices without bf16)')
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--iters', type=int, default=5)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=2, help='alternate the peers this many times; best is kept')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    args = parser.parse_args()
    device = torch.device(args.device)
    peers = PEERS[args.model](args.img_size)
    results: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):  # alternate so drift (thermal, other load) hits both peers alike
        for name, build in peers.items():
            ips, mem = bench(build, args, device)
            best = results.get(name, (0.0, 0.0))
            results[name] = (max(best[0], ips), max(best[1], mem))
    dtype = str(amp_dtype(device)).replace('torch.', '') if args.amp else 'float32'
    print(f'device={device} dtype={dtype} batch={args.batch_size} img={args.img_size} iters={args.iters}')
    for name, (ips, mem) in results.items():
        print(f'{name:>18}: {ips:8.3f} img/s  peak {mem:9.1f} MiB')
    (ours, (o_ips, o_mem)), (peer, (p_ips, p_mem)) = results.items()
    print(f'ratio {ours} / {peer}: throughput x{o_ips / p_ips:.2f}, peak memory x{o_mem / max(p_mem, 1e-9):.2f}')


if __name__ == '__main__':
    main()
