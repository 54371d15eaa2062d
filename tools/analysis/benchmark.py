"""End-to-end train/inference steps of beit_mm next to its peers, in one process, alternating, same dtype and batch.

    python tools/analysis/benchmark.py [--parts mim mim-tokamp mim2 finetune seg512 seg640 slide640] [--amp]
                                       [--device cuda]
                                       [--batch-size N] [--iters 3] [--rounds 3] [--profile 15] [--out table.md]
    python tools/analysis/benchmark.py --parts backbone --model cvt       # backbone-only train step, CvT-13 vs HF

Parts (random weights; every model is built from its repository's own config, pretrained-weight paths removed):

- ``mim``: BEiT-B/16 masked image modeling step at 224 with the real-size DALL-E tokenizer on the 112 view,
  ``configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py`` vs mmpretrain 1.2.0's
  ``beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py``.
- ``mim-tokamp``: the same step with beit_mm's DALL-E encoder under the step's autocast dtype, as mmpretrain computes
  its targets (the recipe keeps unilm's fp32 targets: unilm ``beit/engine_for_pretraining.py`` tokenizes outside
  autocast), so both sides do the same work in the same dtype.
- ``mim2``: BEiT v2 masked image modeling step (BEiT-B/16 at 224, cls-token pretraining, VQ-KD tokenizer on the 224
  view), ``configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py`` vs mmpretrain 1.2.0's
  ``beitv2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py``. Where ``beit_mm.VQKD`` is not registered, beit_mm's
  model runs with mmpretrain's ``VQKD`` of that config (same size: ViT-B/16 encoder + 8192 x 32 codebook, frozen, in
  eval mode) as its target generator, so the tokenizer costs the same on both sides; the row's title says which.
  Both codebooks get the same random unit codes (a frozen tokenizer's all-zero codebook is refused by beit_mm). Both
  tokenize under the step's autocast, as unilm ``beit2/engine_for_pretraining.py`` lines 54-56 (the config's
  ``VQKD(autocast_dtype=...)``).
- ``finetune``: ImageNet fine-tuning step of BEiT-B/16 at 224, ``configs/beit/beit-base-p16_beit-pre_8xb128-coslr-
  100e_in1k.py`` vs mmpretrain's ``beit/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py`` (hard labels).
- ``seg512`` / ``seg640``: BEiT-B UPerNet train step at 512 / 640, ``configs/beit/beit-base_upernet_8xb2-160k_ade20k-
  640x640.py`` vs mmseg 1.2.2's ``beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py`` (both with the image size
  set to 512 for ``seg512``). With one image per process BatchNorm layers run in eval mode in both (a 1x1 pooled
  map of one image has no batch statistics; 8-GPU training uses SyncBN).
- ``slide640``: slide inference (640 windows, stride 426) of the same segmentors on a 640 x 960 image.
  ``seg<SIZE>`` / ``slide<SIZE>`` run these at another size (e.g. ``seg256`` where 640 is too slow).
- ``heads<SIZE>`` / ``headsinf<SIZE>``: beit_mm's segmentors on the same BEiT-B at ``SIZE``, each a row with its
  ratio against UPerNet (``configs/beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py``): EoMT
  (``configs/eomt/eomt_beit-base_*512x512.py``), Mask2Former (mmseg's Mask2FormerHead,
  ``configs/mask2former/mask2former_beit-base_*.py``), and ViT-Adapter with each of the two heads
  (``configs/vit_adapter/mask2former_beit-adapter-base_*.py``, ``configs/vit_adapter/beit-adapter-base_upernet_*.py``),
  all built at ``SIZE``: the train step (EoMT with masked attention on, as at the start of training, its most expensive
  phase) and whole-image inference at the crop (EoMT after mask annealing: no masks at inference), labels of 8 classes
  per image in 4 x 4 regions (the matching losses' cost grows with the classes an image holds). ``headsinf`` also
  prints each model's FLOPs and parameters (``get_flops.py``'s count, one image at the crop). ``heads-demo`` /
  ``headsinf-demo``: the same on the five 64 px demo configs (``configs/demo/beit-tiny-p8_upernet_...``,
  ``eomt_beit-tiny-p8_...``, ``mask2former_beit-tiny-p8_...``, ``beit-adapter-tiny_upernet_...``,
  ``mask2former_beit-adapter-tiny_...``: the same 4 blocks, 96 wide, 16 px patches under the adapter, 8 px
  otherwise); ``heads-study`` / ``headsinf-study``: on the MIM study's three fine-tuning configs
  (``configs/studies/beit-tiny-p8_beit-pre_{eomt,mask2former,upernet}_1xb8-1.2k_...``, 7 classes, so up to 7 per
  image).
- ``backbone``: the older backbone-only step (``--model beit``: BEiT-B vs mmseg's BEiT; ``--model cvt``: CvT-13 vs
  HF ``CvtModel``).

A train step is the model's ``loss`` on already-preprocessed tensors, backward and an AdamW step (beit_mm: fused
AdamW where the device supports it, as ``tools/train.py``; the peers: torch's default AdamW, as their own
``tools/train.py``). ``--amp`` autocasts forward and loss with the dtype ``tools/train.py --amp`` picks for the device
(``beit_mm.engine.amp_optim_wrapper.amp_dtype_for_device``). Peers alternate within each round; the table shows the
median over rounds.
Peak memory: ``torch.cuda.max_memory_allocated`` on CUDA; on CPU the peak resident-set growth from before the model is
built (glibc ``malloc_trim`` between models). The per-part split comes from one extra step with timing hooks: forward
time of each part (summed over its runs of calls: first pre-hook to last post-hook of its modules), backward split at
the moment the gradient reaches the backbone's last output (the autograd engine runs every later-created node, i.e.
the neck and heads, first), and the optimizer step. ``--profile N`` prints torch.profiler's top-N operators per
model. Nothing here is asserted by tests.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import gc
import os
import os.path as osp
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

SPLIT_PARTS = {'tokenizer': ('target_generator', ), 'backbone': ('backbone', ),
               'neck + head': ('neck', 'head', 'decode_head', 'auxiliary_head', 'mask_head', 'upscale', 'class_head')}
# rows of beit_mm models (fused AdamW where the device has it)
OURS = ('beit_mm', 'EoMT', 'Mask2Former', 'UPerNet', 'ViT-Adapter + Mask2Former', 'ViT-Adapter + UPerNet')


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


# ---------------------------------------------------------------------------------------------------------- models
def peer_config(package: str, rel_path: str) -> str:
    """A config shipped inside an installed OpenMMLab package (``<package>/.mim/configs/...``)."""
    import importlib
    path = osp.join(osp.dirname(importlib.import_module(package).__file__), '.mim', 'configs', rel_path)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} is missing: install {package} from PyPI (its wheel ships .mim/configs)')
    return path


def build_model(path: str, overrides: Callable[[dict], None] | None = None) -> nn.Module:
    """``path``'s model by :func:`beit_mm.apis.build_from_config` (random init, no ``Pretrained`` file or
    ``pretrained`` path read, the config's ``default_scope``, SyncBN as BN), ``overrides`` applied to its model dict
    first. Train/eval mode: :func:`build_part_model`."""
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    cfg = Config.fromfile(path)
    if overrides is not None:
        model_cfg = cfg.model.to_dict()
        overrides(model_cfg)
        cfg.model = model_cfg
    return build_from_config(cfg)


@dataclass
class Part:
    """One benchmark row: two model builders and a step function ``step(model, is_ours, inputs) -> loss | output``."""
    title: str
    builders: dict[str, Callable[[], nn.Module]]
    make_inputs: Callable[[int, torch.device], dict]
    step: Callable[[nn.Module, bool, dict], torch.Tensor]
    train: bool = True
    bn_eval: bool = False
    flops_shape: tuple[int, int] | None = None  # FLOPs and parameters of each model at this input (get_flops.py's)


def mim_part(args, tokenizer_like_peer: bool = False) -> Part:
    """(a); with ``tokenizer_like_peer`` (``mim-tokamp``) beit_mm's DALL-E encoder runs under the step's autocast
    dtype (``DALLEEncoder(autocast_dtype=...)``) as mmpretrain's does, where the recipe keeps unilm's fp32 targets."""
    import numpy as np
    from mmpretrain.structures import DataSample

    from beit_mm.data.masking import BlockwiseMaskGenerator
    from beit_mm.models.tokenizers import map_pixels

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        masks = BlockwiseMaskGenerator(14, 75)
        rng = np.random.default_rng(0)
        mask = torch.from_numpy(np.stack([masks(rng) for _ in range(batch)])).to(device)
        return dict(images=torch.randn(batch, 3, 224, 224, generator=g).to(device),
                    target_images=map_pixels(torch.rand(batch, 3, 112, 112, generator=g)).to(device),
                    mask=mask, samples=[DataSample().set_mask(m) for m in mask])

    def step(model, ours, x):
        if ours:
            return model.loss(dict(images=x['images'], target_images=x['target_images'], mask=x['mask']))['loss']
        return model.loss([x['images'], x['target_images']], x['samples'])['loss']

    ours_cfg = osp.join(ROOT, 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    from beit_mm.engine.amp_optim_wrapper import amp_dtype_for_device
    dtype = amp_dtype_for_device(torch.device(args.device).type) if args.amp else None
    amp = {torch.bfloat16: 'bfloat16', torch.float16: 'float16'}.get(dtype)
    if tokenizer_like_peer and amp is None:
        raise SystemExit('--parts mim-tokamp compares the tokenizer under autocast: add --amp (on a device with an '
                         'AMP dtype)')

    def tokenizer_amp(m: dict) -> None:
        m['target_generator']['autocast_dtype'] = amp

    title = '(a) MIM step, BEiT-B 224 + DALL-E tokenizer'
    if tokenizer_like_peer:
        title = f"(a') MIM step, BEiT-B 224 + DALL-E tokenizer in {amp} on both sides"
    return Part(title,
                {'beit_mm': lambda: build_model(ours_cfg, tokenizer_amp if tokenizer_like_peer else None),
                 'mmpretrain': lambda: build_model(peer_cfg)}, make_inputs, step)


class PeerVQKDTargets(nn.Module):
    """mmpretrain's ``VQKD`` behind beit_mm's target-generator interface (``get_targets(inputs)``: ids of the 0..255
    tokenizer view; mmpretrain feeds it (x - 127.5) / 127.5, ``TwoNormDataPreprocessor(second_mean=127.5,
    second_std=127.5)``), frozen and in eval mode like beit_mm's tokenizers. Benchmark use only."""

    def __init__(self, vqkd: nn.Module) -> None:
        super().__init__()
        self.vqkd = vqkd.requires_grad_(False).eval()
        self.vocab_size = vqkd.quantize.num_tokens

    def train(self, mode: bool = True) -> 'PeerVQKDTargets':
        return super().train(False)

    @torch.no_grad()
    def get_targets(self, inputs: dict) -> torch.Tensor:
        return self.vqkd((inputs['target_images'] - 127.5) / 127.5)


def mim2_part(args) -> Part:
    import numpy as np
    from mmpretrain.structures import DataSample

    from beit_mm.data.masking import BlockwiseMaskGenerator
    from beit_mm.registry import MODELS as BEIT_MM_MODELS

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        masks = BlockwiseMaskGenerator(14, 75)
        rng = np.random.default_rng(0)
        mask = torch.from_numpy(np.stack([masks(rng) for _ in range(batch)])).to(device)
        raw = torch.randint(0, 256, (batch, 3, 224, 224), generator=g).float().to(device)
        return dict(images=torch.randn(batch, 3, 224, 224, generator=g).to(device), target_images=raw,
                    peer_target_images=(raw - 127.5) / 127.5, mask=mask,
                    samples=[DataSample().set_mask(m) for m in mask])

    def step(model, ours, x):
        if ours:
            losses = model.loss(dict(images=x['images'], target_images=x['target_images'], mask=x['mask']))
            return losses['loss'] + losses['loss_cls_pt']
        losses = model.loss([x['images'], x['peer_target_images']], x['samples'])
        return losses['loss_1'] + losses['loss_2']

    ours_cfg = osp.join(ROOT, 'configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beitv2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    has_vqkd = BEIT_MM_MODELS.get('VQKD') is not None

    def random_codebook(embedding: nn.Module) -> None:
        # Both tokenizers start with an all-zero codebook (k-means init on the first training batch); a frozen
        # tokenizer needs trained codes (beit_mm's refuses zeros), so both get the same random unit codes.
        g = torch.Generator().manual_seed(0)
        embedding.weight.copy_(nn.functional.normalize(torch.randn(embedding.weight.shape, generator=g), dim=-1))
        embedding.initted.fill_(1)

    def build_peer() -> nn.Module:
        model = build_model(peer_cfg)
        with torch.no_grad():
            random_codebook(model.target_generator.quantize.embedding)
        return model

    def fp32_tokenizer(m: dict) -> None:  # without --amp the row is fp32 on both sides, the tokenizer included
        m['target_generator']['autocast_dtype'] = None

    def build_ours() -> nn.Module:
        if has_vqkd:
            model = build_model(ours_cfg, None if args.amp else fp32_tokenizer)
            with torch.no_grad():
                random_codebook(model.target_generator.quantize.embedding)
            return model

        def stand_in(m: dict) -> None:  # replaced below; only lets BEiTPretrain check the 8192-id vocabulary
            m['target_generator'] = dict(type='beit_mm.DALLEEncoder', group_count=5, n_hid=8, n_blk_per_group=1,
                                         vocab_size=m['head']['vocab_size'], channels_last=False)

        model = build_model(ours_cfg, stand_in)
        model.target_generator = PeerVQKDTargets(build_peer().target_generator)
        return model

    tokenizer = 'beit_mm.VQKD' if has_vqkd else "mmpretrain's VQKD in both"
    return Part(f'(e) BEiT v2 MIM step, BEiT-B 224 + VQ-KD-size tokenizer ({tokenizer})',
                {'beit_mm': build_ours, 'mmpretrain': build_peer}, make_inputs, step)


def finetune_part(args) -> Part:
    from mmpretrain.structures import DataSample

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        labels = torch.randint(0, 1000, (batch, ), generator=g)
        return dict(images=torch.randn(batch, 3, 224, 224, generator=g).to(device),
                    samples=[DataSample().set_gt_label(int(l)).to(device) for l in labels])

    def step(model, ours, x):
        return model.loss(x['images'], x['samples'])['loss']

    ours_cfg = osp.join(ROOT, 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beit/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py')

    def no_batch_augments(m: dict) -> None:
        m.pop('train_cfg', None)  # Mixup/CutMix run in the data preprocessor, which the benchmark bypasses

    return Part('(b) ImageNet fine-tuning step, BEiT-B 224',
                {'beit_mm': lambda: build_model(ours_cfg, no_batch_augments),
                 'mmpretrain': lambda: build_model(peer_cfg, no_batch_augments)},
                make_inputs, step)


def seg_builders(size: int) -> dict[str, Callable[[], nn.Module]]:
    ours_cfg = osp.join(ROOT, 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py')
    peer_cfg = peer_config('mmseg', 'beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py')

    def at_size(m: dict) -> None:
        m['backbone']['img_size'] = size
        m['data_preprocessor']['size'] = (size, size)
        m['test_cfg'] = dict(mode='slide', crop_size=(size, size), stride=(size * 2 // 3, ) * 2)  # 640 -> 426

    return {'beit_mm': lambda: build_model(ours_cfg, at_size),
            'mmseg': lambda: build_model(peer_cfg, at_size)}


def seg_part(size: int) -> Part:
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(size, size), pad_shape=(size, size), ori_shape=(size, size)))
            s.gt_sem_seg = PixelData(data=torch.randint(0, 150, (1, size, size), generator=g).to(device))
            samples.append(s)
        return dict(images=torch.randn(batch, 3, size, size, generator=g).to(device), samples=samples)

    def step(model, ours, x):
        losses = model.loss(x['images'], x['samples'])
        return sum(v for k, v in losses.items() if 'loss' in k)

    return Part(f'(c) segmentation train step, BEiT-B UPerNet {size}', seg_builders(size), make_inputs, step,
                bn_eval=True)


def slide_part(size: int) -> Part:
    width = size * 3 // 2  # two windows across at stride 2/3 of the window, as an ADE20K 640 x 853-960 image
    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        metas = [dict(img_shape=(size, width), pad_shape=(size, width), ori_shape=(size, width))] * batch
        return dict(images=torch.randn(batch, 3, size, width, generator=g).to(device), metas=metas)

    def step(model, ours, x):
        return model.inference(x['images'], x['metas'])

    return Part(f'(d) slide inference {size} (stride {size * 2 // 3}), {size}x{width} image', seg_builders(size),
                make_inputs, step, train=False)


def heads_configs(size: str) -> tuple[dict[str, str], int]:
    """``({row: config}, crop)`` of ``heads<SIZE>`` (BEiT-B configs, built at SIZE) or ``heads-demo`` /
    ``heads-study``; UPerNet last, the reference of the other rows' ratios."""
    import glob

    def one(pattern: str) -> str:
        found = sorted(glob.glob(osp.join(ROOT, 'configs', pattern)))
        if not found:
            raise SystemExit(f'no configs/{pattern} config; use heads-demo')
        return found[0]

    if size == '-demo':
        demo = osp.join(ROOT, 'configs', 'demo')
        return {'EoMT': osp.join(demo, 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'),
                'ViT-Adapter + Mask2Former': osp.join(demo,
                                                      'mask2former_beit-adapter-tiny_1xb8-1k_ade20k-demo-64x64.py'),
                'Mask2Former': osp.join(demo, 'mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'),
                'ViT-Adapter + UPerNet': osp.join(demo, 'beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py'),
                'UPerNet': osp.join(demo, 'beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py')}, 64
    if size == '-study':
        return {head: osp.join(ROOT, f'configs/studies/beit-tiny-p8_beit-pre_{key}_1xb8-1.2k_shapes-64x64.py')
                for head, key in (('EoMT', 'eomt'), ('Mask2Former', 'mask2former'), ('UPerNet', 'upernet'))}, 64
    return {'EoMT': one('eomt/eomt_beit-base_*512x512.py'),
            'ViT-Adapter + Mask2Former': one('vit_adapter/mask2former_beit-adapter-base_*.py'),
            'Mask2Former': one('mask2former/mask2former_beit-base_*.py'),
            'ViT-Adapter + UPerNet': one('vit_adapter/beit-adapter-base_upernet_*.py'),
            'UPerNet': one('beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py')}, int(size)


def heads_part(size: str, train: bool) -> Part:
    """The segmentors of :func:`heads_configs` on the same BEiT: train step (EoMT masks on) or whole-image inference
    (EoMT annealed; with the FLOPs and parameters of each model)."""
    configs, crop = heads_configs(size)

    def at_size(m: dict) -> None:
        m['backbone']['img_size'] = crop
        m['data_preprocessor']['size'] = (crop, crop)
        m['test_cfg'] = dict(mode='whole')

    def builder(path: str) -> Callable[[], nn.Module]:
        def build() -> nn.Module:
            model = build_model(path, at_size)
            if hasattr(model, 'set_annealing_step'):  # EoMT: mask probabilities 1 (masks on) / 0 (annealed)
                model.set_annealing_step(0 if train else 10**9)
            return model
        return build

    from mmengine.config import Config
    seg = seg_part(crop)
    metas = [dict(img_shape=(crop, crop), pad_shape=(crop, crop), ori_shape=(crop, crop))]
    num_classes = Config.fromfile(configs['UPerNet']).model.decode_head.num_classes

    def make_inputs(batch: int, device: torch.device) -> dict:
        """Label maps as scenes have them (the matching loss's cost grows with the classes present; per-pixel
        random labels would give EoMT and Mask2Former 150 targets per image): 8 classes per image (at most the
        configs' class count) on a 4 x 4 grid of regions."""
        from mmengine.structures import PixelData
        x = seg.make_inputs(batch, device)
        g = torch.Generator().manual_seed(1)
        for sample in x['samples']:
            classes = torch.randperm(num_classes, generator=g)[:8]
            cells = classes[torch.randint(0, len(classes), (1, 1, 4, 4), generator=g)].float()
            labels = torch.nn.functional.interpolate(cells, size=(crop, crop), mode='nearest')[0].long()
            sample.gt_sem_seg = PixelData(data=labels.to(device))
        return x

    def step(model, ours, x):
        if train:
            return seg.step(model, ours, x)
        return model.inference(x['images'], metas * x['images'].shape[0])

    what = 'train step (EoMT masks on)' if train else 'whole-image inference (EoMT annealed)'
    name = {'-demo': 'tiny BEiT demo', '-study': "MIM study's tiny BEiT"}.get(size, 'BEiT-B')
    return Part(f'(h) segmentors / UPerNet, {what}, {name} {crop}',
                {row: builder(path) for row, path in configs.items()}, make_inputs, step, train=train,
                bn_eval=True, flops_shape=None if train else (crop, crop))


def backbone_part(model: str, img_size: int) -> Part:
    if model == 'beit':
        from mmseg.models.backbones import BEiT as MMSegBEiT

        from beit_mm.models.backbones import BEiT
        builders = {
            'beit_mm': lambda: BEiT(arch='base', img_size=img_size, drop_path_rate=0.1, out_indices=(3, 5, 7, 11)),
            'mmseg': lambda: MMSegBEiT(img_size=img_size, embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4,
                                       qv_bias=True, drop_path_rate=0.1, init_values=0.1, out_indices=(3, 5, 7, 11),
                                       norm_cfg=dict(type='LN', eps=1e-6))}
        title = f'backbone train step, BEiT-B {img_size}'
    else:
        from transformers import CvtConfig, CvtModel

        from beit_mm.models.backbones import CvT

        class HFCvt(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.backbone = CvtModel(CvtConfig(drop_path_rate=[0.0, 0.0, 0.1]), add_pooling_layer=False)

            def forward(self, x):
                out = self.backbone(x, output_hidden_states=True)
                return tuple(out.hidden_states) + (out.cls_token_value, )

        builders = {'beit_mm': lambda: CvT(arch='cvt-13', act='gelu', out_indices=(0, 1, 2)), 'HF': HFCvt}
        title = f'backbone train step, CvT-13 {img_size}'

    class Wrapped(nn.Module):  # gives both peers a `backbone` attribute for the split
        def __init__(self, backbone: nn.Module) -> None:
            super().__init__()
            self.backbone = backbone

        def forward(self, x):
            return self.backbone(x)

    def make_inputs(batch: int, device: torch.device) -> dict:
        return dict(images=torch.randn(batch, 3, img_size, img_size, generator=torch.Generator().manual_seed(0)
                                       ).to(device))

    def step(model, ours, x):
        return sum(o.float().square().mean() for o in model(x['images']) if torch.is_tensor(o))

    return Part(title, {k: (lambda b=b: Wrapped(b())) for k, b in builders.items()}, make_inputs, step)


def make_part(name: str, args) -> Part:
    heads = re.fullmatch(r'heads(inf)?(\d+|-demo|-study)', name)
    if heads and (heads[2] in ('-demo', '-study') or int(heads[2]) % 16 == 0):
        return heads_part(heads[2], train=heads[1] is None)
    match = re.fullmatch(r'(seg|slide)(\d+)', name)
    if match and int(match[2]) % 16 == 0:
        return (seg_part if match[1] == 'seg' else slide_part)(int(match[2]))
    if name in ('mim', 'mim-tokamp', 'mim2', 'finetune', 'backbone'):
        return {'mim': mim_part, 'mim-tokamp': lambda a: mim_part(a, tokenizer_like_peer=True), 'mim2': mim2_part,
                'finetune': finetune_part,
                'backbone': lambda a: backbone_part(a.model, a.img_size)}[name](args)
    raise SystemExit(f'unknown part {name!r}: use mim, mim-tokamp, mim2, finetune, seg<SIZE>, slide<SIZE>, '
                     'heads<SIZE>, headsinf<SIZE> (SIZE divisible by 16), heads-demo, headsinf-demo, heads-study, '
                     'headsinf-study or backbone')


# ------------------------------------------------------------------------------------------------------- running
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


def bench(part: Part, name: str, args, device: torch.device, dtype: torch.dtype | None, split: bool,
          profile: int) -> dict:
    """One model: img/s over ``args.iters`` steps after ``args.warmup``, peak memory, optional split and profile."""
    ours = name in OURS
    release_memory(device)
    result = {}
    with RssPeak() as rss:
        model = build_part_model(part, name, device)
        opt = make_optimizer(model, ours, device) if part.train else None
        inputs = part.make_inputs(args.batch_size, device)
        scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
        timer: PartTimer | None = None
        times = {}

        def step() -> None:
            t0 = time.perf_counter()
            with torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None), \
                    (contextlib.nullcontext() if part.train else torch.no_grad()):
                out = part.step(model, ours, inputs)
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

        for _ in range(args.warmup):
            step()
        sync(device)
        start = time.perf_counter()
        for _ in range(args.iters):
            step()
        sync(device)
        result['ips'] = args.batch_size * args.iters / (time.perf_counter() - start)
        if split:
            timer = PartTimer(model, device)
            step()
            timer.remove()
            result['split'] = summarize_split(timer, times, part.train)
            timer = None
        if profile:
            from torch.profiler import ProfilerActivity, profile as torch_profile
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
            with torch_profile(activities=activities) as prof:
                step()
                sync(device)
            key = 'self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
            result['profile'] = prof.key_averages().table(sort_by=key, row_limit=profile, max_name_column_width=48)
        model = opt = inputs = None  # freed before the peak is read (rebound, not del: step() reads these names)
    result['mem'] = (torch.cuda.max_memory_allocated(device) if device.type == 'cuda' else rss.peak) / 2**20
    return result


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


def complexity_of(part: Part, name: str) -> dict:
    """FLOPs and parameters of one model of ``part`` at ``part.flops_shape``, counted as ``get_flops.py`` counts them:
    one image, the inference forward, the training-only auxiliary head left out."""
    import get_flops  # tools/analysis/get_flops.py: a script's own folder is sys.path[0]
    torch.manual_seed(0)
    model = part.builders[name]().eval()
    if getattr(model, 'auxiliary_head', None) is not None:
        model.auxiliary_head = None  # mmseg's EncoderDecoder.with_auxiliary_head: False
    return get_flops.complexity(model, part.flops_shape)


def run_part(part: Part, args, device: torch.device, dtype: torch.dtype | None) -> dict[str, dict]:
    runs: dict[str, list[dict]] = {name: [] for name in part.builders}
    for r in range(args.rounds):  # alternate so drift (other load on the machine) hits both alike
        for name in part.builders:
            res = bench(part, name, args, device, dtype, split=args.split and r == 0,
                        profile=args.profile if r == 0 else 0)
            runs[name].append(res)
            print(f'  round {r + 1} {name}: {res["ips"]:.3f} img/s, peak {res["mem"]:.0f} MiB', file=sys.stderr,
                  flush=True)
    out = {}
    for name, rs in runs.items():
        out[name] = dict(ips=statistics.median(r['ips'] for r in rs), mem=statistics.median(r['mem'] for r in rs),
                         all_ips=[r['ips'] for r in rs], split=rs[0].get('split'), profile=rs[0].get('profile'))
        if part.flops_shape is not None:
            out[name].update({k: v for k, v in complexity_of(part, name).items() if k in ('flops', 'params')})
    return out


def markdown(rows: list[tuple[str, dict[str, dict]]], header: str) -> str:
    lines = [header, '',
             '| benchmark | beit_mm img/s | peer img/s (peer) | throughput ratio | beit_mm peak MiB | peer peak MiB | '
             'memory ratio |', '|---|---|---|---|---|---|---|']
    for title, res in rows:
        *models, (peer, p) = res.items()  # the last model is the reference of the others' ratios
        for name, o in models:
            mine = '' if name == 'beit_mm' else f' ({name})'  # heads rows: beit_mm models vs beit_mm's UPerNet
            lines.append(f'| {title} | {o["ips"]:.3f}{mine} | {p["ips"]:.3f} ({peer}) | x{o["ips"] / p["ips"]:.2f} | '
                         f'{o["mem"]:.0f} | {p["mem"]:.0f} | x{o["mem"] / max(p["mem"], 1e-9):.2f} |')
    counts = [(title, name, r) for title, res in rows for name, r in res.items() if 'flops' in r]
    if counts:
        lines += ['', 'FLOPs and parameters (one image at the crop, the inference forward, as get_flops.py counts '
                  'them: one multiply-add = 1 FLOP, the deformable attention\'s sampling not counted, its '
                  'projections counted; no auxiliary head):', '', '| benchmark | model | GFLOPs | parameters (M) |',
                  '|---|---|---|---|']
        lines += [f'| {title} | {name} | {r["flops"] / 1e9:.4g} | {r["params"] / 1e6:.4g} |'
                  for title, name, r in counts]
    splits = [(title, name, r['split']) for title, res in rows for name, r in res.items() if r.get('split')]
    if splits:
        lines += ['', 'Time per step by part, seconds (share of the step):', '',
                  '| benchmark | model | tokenizer | backbone | neck + head | optimizer | other | step |',
                  '|---|---|---|---|---|---|---|---|']
        for title, name, s in splits:
            cells = ' | '.join(f'{s[k]:.2f} ({s[k] / s["total"]:.0%})' for k in
                               ('tokenizer', 'backbone', 'neck + head', 'optimizer', 'other'))
            lines.append(f'| {title} | {name} | {cells} | {s["total"]:.2f} |')
    return '\n'.join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--parts', nargs='+', default=['mim', 'mim2', 'finetune', 'seg512', 'seg640', 'slide640'],
                        help='mim, mim-tokamp, mim2, finetune, seg<SIZE>, slide<SIZE>, heads<SIZE>, headsinf<SIZE> '
                        '(SIZE a multiple of 16), heads-demo, headsinf-demo, heads-study, headsinf-study, backbone')
    parser.add_argument('--model', choices=['beit', 'cvt'], default='beit', help='for --parts backbone')
    parser.add_argument('--img-size', type=int, default=224, help='for --parts backbone')
    parser.add_argument('--amp', action='store_true', help="autocast with tools/train.py --amp's dtype")
    parser.add_argument('--batch-size', type=int, default=None,
                        help='images per step (default: CUDA 32 at 224 and 2 for segmentation; CPU 2 and 1)')
    parser.add_argument('--iters', type=int, default=2, help='timed steps per model and round')
    parser.add_argument('--warmup', type=int, default=1, help='untimed steps per model and round first')
    parser.add_argument('--rounds', type=int, default=3, help='alternations of the peers; medians are reported')
    parser.add_argument('--no-split', dest='split', action='store_false', help='skip the per-part time split')
    parser.add_argument('--profile', type=int, default=0, metavar='N', help="print torch.profiler's top-N ops")
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--out', help='also write the Markdown tables to this file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
    return parser.parse_args()


def describe_device(device: torch.device) -> str:
    if device.type == 'cuda':
        return f'{torch.cuda.get_device_name(device)}, torch {torch.__version__}'
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    return f'{describe_cpu()}, torch {torch.__version__}'


def main() -> None:
    args = parse_args()
    import beit_mm  # noqa: F401  (registers the plugin)
    from mmengine.logging import MMLogger

    from beit_mm.fileio.outputs import OutputError, check_output
    if args.out:
        try:
            check_output(args.out, args.overwrite)  # at start, not after minutes of timing
        except OutputError as error:
            raise SystemExit(f'benchmark: {error}') from None
    from beit_mm.engine.amp_optim_wrapper import amp_dtype_for_device
    MMLogger.get_instance('benchmark', log_level='WARNING')
    logger = MMLogger.get_current_instance()
    logger.setLevel('WARNING')
    device = torch.device(args.device)
    dtype = amp_dtype_for_device(device.type) if args.amp else None
    rows = []
    for name in args.parts:
        seg = name.startswith(('seg', 'slide', 'heads'))
        if args.batch_size is None:
            args.batch_size = (2 if seg else 32) if device.type == 'cuda' else (1 if seg else 2)
            batch_default = True
        else:
            batch_default = False
        part = make_part(name, args)
        print(f'{part.title}: batch {args.batch_size}', file=sys.stderr, flush=True)
        res = run_part(part, args, device, dtype)
        rows.append((f'{part.title}, batch {args.batch_size}', res))
        for peer, r in res.items():
            if r['profile']:
                print(f'\n### {part.title}: {peer} profile\n\n```\n{r["profile"]}\n```\n')
        if batch_default:
            args.batch_size = None
    dtype_name = str(dtype).replace('torch.', '') + ' autocast' if dtype is not None else 'float32'
    header = (f'Device: {describe_device(device)}; dtype {dtype_name}; {args.iters} timed steps after {args.warmup} '
              f'warm-up, median of {args.rounds} alternating rounds.')
    table = markdown(rows, header)
    print(table)
    if args.out:  # through a temporary file and a rename: a kill leaves the old table or the new one
        from beit_mm.fileio.outputs import atomic_file
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            f.write(table + '\n')


if __name__ == '__main__':
    main()
