"""Measuring one benchmark part: build each model, time its train (or inference) step eager or compiled, read its
peak memory, split one step by part, count its FLOPs (:mod:`beit_mm.evaluation.flops`).

A train step is the model's ``loss`` on preprocessed tensors, backward and an AdamW step (fused for beit_mm where the
device has it, torch's default for the peers, as each trains). Compiled rows compile the forward + loss of what the
model declares in ``compile_units``; their warm-up steps are untimed and reported. On CUDA a step out of memory
halves the batch and the row says so. Peak memory is ``max_memory_allocated`` on CUDA, the resident-set growth on
CPU. The per-part split times one more eager step with hooks, splitting backward when the gradient reaches the
backbone's last output, since autograd runs the neck and heads first.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass, field

import torch
from torch import nn

from ..engine.compile import compile_model, compile_units

SPLIT_PARTS = {'tokenizer': ('target_generator', ), 'backbone': ('backbone', ),
               'neck + head': ('neck', 'head', 'decode_head', 'auxiliary_head', 'mask_head', 'upscale', 'class_head')}
# rows of beit_mm models (fused AdamW where the device has it); a variant row is named '<row> (<attn_impl>)'
OURS = ('beit_mm', 'EoMT', 'Mask2Former', 'UPerNet', 'ViT-Adapter + Mask2Former', 'ViT-Adapter + UPerNet')


def is_ours(name: str) -> bool:
    """Whether a row is one of beit_mm's models (or an attention variant of one, :func:`with_attention_variants`)."""
    return name.split(' (')[0] in OURS


# ----------------------------------------------------------------------------------------------------- measurement
class RssPeak:
    """Peak resident-set growth of this process while inside the context (CPU memory estimate), sampled every 2 ms."""

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
    """Return freed memory to the OS so the next model's peak starts from scratch."""
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    else:
        ctypes.CDLL(ctypes.util.find_library('c')).malloc_trim(0)


def sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


class PartTimer:
    """Seconds of one step spent in each part of a model (see the module docstring for how backward is split)."""

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        self.device = device
        self.handles = []
        self.first: float | None = None  # the step's first pre-hook of any part
        self.last: float | None = None  # the step's last post-hook of any part
        self.busy: dict[str, float] = {}  # part -> seconds inside its episodes
        self.episode: list | None = None  # [part, first pre-hook, last post-hook] of the running episode
        self.boundary: float | None = None
        for part, names in SPLIT_PARTS.items():
            for name in names:
                sub = getattr(model, name, None)
                if isinstance(sub, nn.Module):
                    for m in sub.modules():
                        self.handles.append(m.register_forward_pre_hook(self._pre(part)))
                        self.handles.append(m.register_forward_hook(self._post(part)))
        backbone = getattr(model, 'backbone')
        self.last_output: torch.Tensor | None = None
        for m in backbone.modules():
            self.handles.append(m.register_forward_hook(self._remember_output))

    def _now(self) -> float:
        sync(self.device)
        return time.perf_counter()

    def _close_episode(self) -> None:
        if self.episode is not None:
            part, start, end = self.episode
            self.busy[part] = self.busy.get(part, 0.0) + end - start
            self.episode = None

    def forward_seconds(self) -> dict[str, float]:
        """Forward seconds per part: the sum of its episodes (first pre-hook to last post-hook of a run of calls of
        that part), so parts that alternate (slide inference: backbone, head, backbone, head, ...) are not counted
        over each other."""
        self._close_episode()
        return dict(self.busy)

    def _pre(self, part: str):
        def hook(module, args):
            t = self._now()
            self.first = t if self.first is None else self.first
            if self.episode is None or self.episode[0] != part:
                self._close_episode()
                self.episode = [part, t, t]
        return hook

    def _post(self, part: str):
        def hook(module, args, output):
            self.last = t = self._now()
            if self.episode is not None and self.episode[0] == part:
                self.episode[2] = t
        return hook

    def _remember_output(self, module, args, output) -> None:
        out = output[-1] if isinstance(output, (tuple, list)) else output
        if torch.is_tensor(out) and out.requires_grad:
            self.last_output = out

    def arm_backward(self) -> None:
        """Call after the forward: stamps when the gradient reaches the backbone's last output."""
        if self.last_output is not None:
            self.last_output.register_hook(lambda g: setattr(self, 'boundary', self._now()) or None)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


@dataclass
class Part:
    """One benchmark: model builders (the last one is the reference of the others' ratios) and a step function
    ``step(model, is_ours, inputs) -> loss | output``; ``make_inputs(batch, device)`` builds preprocessed inputs."""
    title: str
    builders: dict[str, Callable[[], nn.Module]]
    make_inputs: Callable[[int, torch.device], dict]
    step: Callable[[nn.Module, bool, dict], torch.Tensor]
    train: bool = True
    bn_eval: bool = False
    flops_shape: tuple[int, int] | None = (224, 224)  # one image for the FLOP counter (None: not counted)
    windows: int = 1  # forwards per image (slide inference: windows per image); the count is per window
    flops_each: bool = False  # count every model (heads rows: different models); else the first one counts for all
    skipped: dict[str, str] = field(default_factory=dict)  # peer -> why it did not run (printed as a row)


@dataclass
class Timing:
    """How long to time: ``iters`` timed steps after ``warmup`` untimed ones per model and round (compiled rows: at
    least 3), ``rounds`` alternations of the models (medians reported); ``split`` the per-part split and ``profile``
    torch.profiler's top-N operators, both in the first round of eager rows; ``categories`` one profiled step of every
row in the first round, its device time by kernel category (:mod:`beit_mm.benchmarks.kernels`)."""
    iters: int
    warmup: int
    rounds: int
    split: bool = True
    profile: int = 0
    categories: bool = False


def make_optimizer(model: nn.Module, ours: bool, device: torch.device) -> torch.optim.Optimizer:
    from beit_mm.engine.amp_optim_wrapper import fused_adamw_supported
    params = [p for p in model.parameters() if p.requires_grad]
    if ours and fused_adamw_supported(device.type):
        return torch.optim.AdamW(params, lr=1e-4, fused=True)
    return torch.optim.AdamW(params, lr=1e-4)


def build_part_model(part: Part, name: str, device: torch.device) -> nn.Module:
    """Build one peer of ``part`` (seed 0) on ``device`` in the part's train/eval mode, BatchNorm in eval mode where
    the part asks for it (``bn_eval``)."""
    torch.manual_seed(0)
    model = part.builders[name]().to(device)
    model.train(part.train)
    if part.bn_eval:
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
    return model


def summarize_split(timer: PartTimer, times: dict, train: bool) -> dict[str, float]:
    """Seconds per part: tokenizer (forward), backbone and neck + head (forward + backward), optimizer, other."""
    fwd = timer.forward_seconds()
    split = {'tokenizer': fwd.get('tokenizer', 0.0), 'backbone': fwd.get('backbone', 0.0),
             'neck + head': fwd.get('neck + head', 0.0), 'optimizer': 0.0}
    if train:
        boundary = timer.boundary if timer.boundary is not None else times['bwd0']
        split['neck + head'] += boundary - times['bwd0']
        split['backbone'] += times['opt0'] - boundary
        split['optimizer'] = times['end'] - times['opt0']
        total = times['end'] - times['start']
    else:
        total = timer.last - timer.first
    split['other'] = max(0.0, total - sum(split.values()))
    split['total'] = total
    return split


def bench(part: Part, name: str, timing: Timing, device: torch.device, dtype: torch.dtype | None, batch: int,
          compiled: bool, split: bool, profile: int, categories: bool = False) -> dict:
    """One model at ``batch``: img/s over ``timing.iters`` steps after the warm-up, peak memory, compile time
    (``compiled``), optional split and profile (eager only: hooks would break the compiled graph) and the device time
    by kernel category of one step (``categories``, eager or compiled)."""
    ours = is_ours(name)
    release_memory(device)
    result = {}
    with RssPeak() as rss:
        model = build_part_model(part, name, device)
        opt = make_optimizer(model, ours, device) if part.train else None
        inputs = part.make_inputs(batch, device)
        scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
        timer: PartTimer | None = None
        times = {}
        forward = lambda x: part.step(model, ours, x)  # noqa: E731
        if compiled:
            torch._dynamo.reset()  # each model compiles from scratch (no cache hits on the previous model's code)
            if ours and compile_units(model) != [model]:
                compile_model(model)  # what the model declares, as training compiles it
            else:  # the step: a whole-compiling model gives one graph
                forward = torch.compile(forward)

        def step() -> None:
            t0 = time.perf_counter()
            with torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None), \
                    (contextlib.nullcontext() if part.train else torch.no_grad()):
                out = forward(inputs)
            if not part.train:
                return
            if timer is not None:
                timer.arm_backward()
                sync(device)
                times['bwd0'] = time.perf_counter()
            scaler.scale(out).backward()
            if timer is not None:
                sync(device)
                times['opt0'] = time.perf_counter()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            if timer is not None:
                sync(device)
                times['end'] = time.perf_counter()
                times['start'] = t0

        start = time.perf_counter()
        for _ in range(max(timing.warmup, 3) if compiled else timing.warmup):
            step()
        sync(device)
        result['warmup_s'] = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(timing.iters):
            step()
        sync(device)
        result['ips'] = batch * timing.iters / (time.perf_counter() - start)
        if split and not compiled:
            timer = PartTimer(model, device)
            step()
            timer.remove()
            result['split'] = summarize_split(timer, times, part.train)
            timer = None
        if profile and not compiled:
            from torch.profiler import ProfilerActivity, profile as torch_profile
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
            with torch_profile(activities=activities) as prof:
                step()
                sync(device)
            key = 'self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
            result['profile'] = prof.key_averages().table(sort_by=key, row_limit=profile, max_name_column_width=48)
        if categories:
            from torch.profiler import ProfilerActivity, profile as torch_profile

            from .kernels import profile_categories
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
            with torch_profile(activities=activities) as prof:
                sync(device)
                start = time.perf_counter()
                step()
                sync(device)
                wall_ms = (time.perf_counter() - start) * 1000
            result['categories'] = dict(profile_categories(prof, device.type), wall_ms=wall_ms)
        model = opt = inputs = forward = None  # freed before the peak is read (rebound: step() reads these names)
    result['mem'] = (torch.cuda.max_memory_allocated(device) if device.type == 'cuda' else rss.peak) / 2**20
    return result


def count_flops(part: Part, name: str) -> dict:
    """The counter's multiply-adds and parameters of one model of ``part`` (:func:`beit_mm.evaluation.flops.complexity`:
    one image at ``part.flops_shape``, the inference forward of a segmentor or classifier, the training forward of a
    MIM model with its tokenizer's share; built on the CPU with seed 0, in eval mode)."""
    from beit_mm.evaluation.flops import complexity
    torch.manual_seed(0)
    model = part.builders[name]().eval()
    if getattr(model, 'auxiliary_head', None) is not None:
        model.auxiliary_head = None  # training-only (mmseg's EncoderDecoder.with_auxiliary_head: False)
    result = complexity(model, part.flops_shape, warnings=False)
    return dict(macs=result['flops'] * part.windows, frozen_macs=result['tokenizer_flops'] * part.windows,
                params=result['params'])


def run_part(part: Part, timing: Timing, device: torch.device, dtype: torch.dtype | None, batch: int,
             modes: tuple[str, ...] = ('eager', ), compile_peers: bool = False) -> dict:
    """Every model of ``part`` in every mode (``'eager'``, ``'compiled'``; compiled: beit_mm's models only unless
    ``compile_peers``), alternating within each round: ``dict(batch, batch_note, rows={(name, mode): result},
    flops={name: counts}, counted=[the models counted])``. On CUDA an out-of-memory error halves ``batch`` and runs the part again from the start
    (down to 1)."""
    asked = batch
    while True:
        out_of_memory = False
        try:
            rows = _run_rounds(part, timing, device, dtype, batch, modes, compile_peers)
        except torch.OutOfMemoryError:
            if batch == 1:
                raise
            out_of_memory = True
        if not out_of_memory:
            break
        release_memory(device)  # after the except block: its traceback no longer holds the failed step's tensors
        print(f'  out of memory at batch {batch}: halving to {batch // 2}', file=sys.stderr, flush=True)
        batch //= 2
    note = '' if batch == asked else f' ({asked} ran out of memory)'
    flops = {}
    if part.flops_shape is None:
        return dict(batch=batch, batch_note=note, rows=rows, flops=flops, counted=[])
    names = list(part.builders) if part.flops_each else list(part.builders)[:1]
    for name in names:
        flops[name] = count_flops(part, name)
    if not part.flops_each:  # the peers build the same architecture: the first model's count holds for all
        flops = {name: flops[names[0]] for name in part.builders}
    return dict(batch=batch, batch_note=note, rows=rows, flops=flops, counted=names)


def _run_rounds(part: Part, timing: Timing, device: torch.device, dtype: torch.dtype | None, batch: int,
                modes: tuple[str, ...], compile_peers: bool) -> dict:
    runs: dict[tuple[str, str], list[dict]] = {(name, mode): [] for mode in modes for name in part.builders
                                               if mode == 'eager' or compile_peers or is_ours(name)}
    for r in range(timing.rounds):  # alternate so drift (other load on the machine) hits all alike
        for name, mode in runs:
            res = bench(part, name, timing, device, dtype, batch, compiled=mode == 'compiled',
                        split=timing.split and r == 0, profile=timing.profile if r == 0 else 0,
                        categories=timing.categories and r == 0)
            runs[name, mode].append(res)
            print(f'  round {r + 1} {name} {mode}: {res["ips"]:.3f} img/s, peak {res["mem"]:.0f} MiB'
                  + (f', warm-up {res["warmup_s"]:.0f} s' if mode == 'compiled' else ''), file=sys.stderr, flush=True)
    out = {}
    for key, rs in runs.items():
        out[key] = dict(ips=statistics.median(r['ips'] for r in rs), mem=statistics.median(r['mem'] for r in rs),
                        all_ips=[r['ips'] for r in rs], warmup_s=rs[0]['warmup_s'], split=rs[0].get('split'),
                        profile=rs[0].get('profile'), categories=rs[0].get('categories'))
    return out


def with_attention_variants(part: Part, impls: list[str]) -> Part:
    """``part`` with one row per attention kernel in ``impls`` for each of beit_mm's models (named
    ``'<row> (<impl>)'``, before the peers), every ``BEiTAttention`` set to that ``attn_impl``."""
    from beit_mm.models.layers.attention import ATTN_IMPLS, BEiTAttention
    for impl in impls:
        if impl not in ATTN_IMPLS:
            raise ValueError(f'attn_impl {impl!r} is not one of {ATTN_IMPLS}')

    def variant(build: Callable[[], nn.Module], impl: str) -> Callable[[], nn.Module]:
        def build_variant() -> nn.Module:
            model = build()
            for m in model.modules():
                if isinstance(m, BEiTAttention):
                    m.attn_impl = impl
            return model
        return build_variant

    builders = {}
    for name, build in part.builders.items():
        if is_ours(name):
            builders.update({f'{name} ({impl})': variant(build, impl) for impl in impls})
        else:
            builders[name] = build
    return dataclasses.replace(part, builders=builders)
