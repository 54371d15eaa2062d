"""BEiT masked-image-modeling train-step throughput: beit_mm ``BEiTPretrain`` next to mmpretrain 1.2.0's ``BEiT``.

    python tools/analysis/benchmark_mim.py [--amp] [--batch-size 8] [--iters 3] [--device cpu]

Both models are BEiT-B/16 (shared relative position bias, layer scale 0.1, drop path 0.1, final norm, mask token)
with a linear MIM head over 8192 visual tokens and the real-size DALL-E dVAE encoder (n_hid 256, 2 blocks per group)
computing the targets of the 112x112 view, all randomly initialized, in the same process and dtype:

- beit_mm: ``BEiTPretrain(beit_mm.BEiT, beit_mm.BEiTMIMHead, beit_mm.DALLEEncoder)``; the tokenizer runs in fp32
  outside autocast (as unilm) unless ``--tokenizer-bf16``.
- mmpretrain: ``BEiT(BEiTPretrainViT, BEiTV1Head, DALL-E)``; its tokenizer runs under the caller's autocast.

A train step = the model's ``loss`` on preprocessed inputs (224 view normalized, 112 view in the tokenizer's pixel
space, a 75-of-196 blockwise mask), backward, AdamW step. ``--amp`` wraps forward and loss in ``torch.autocast`` with
bfloat16. Prints img/s per model and the beit_mm / mmpretrain ratio. Nothing here is asserted by tests.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

IMG, TOK_IMG, GRID, NUM_MASKED = 224, 112, 14, 75


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--iters', type=int, default=3, help='timed train steps per model')
    parser.add_argument('--warmup', type=int, default=1, help='untimed train steps per model first')
    parser.add_argument('--amp', action='store_true', help='bfloat16 autocast for forward and loss')
    parser.add_argument('--tokenizer-bf16', action='store_true',
                        help="beit_mm's DALLEEncoder with autocast_dtype='bfloat16' (mmpretrain's follows --amp)")
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    return parser.parse_args()


def build_beit_mm(tokenizer_bf16: bool):
    from beit_mm.models.selfsup import BEiTPretrain
    return BEiTPretrain(
        backbone=dict(type='beit_mm.BEiT', arch='base', img_size=IMG, use_rel_pos_bias=False,
                      use_shared_rel_pos_bias=True, layer_scale_init_value=0.1, drop_path_rate=0.1, final_norm=True,
                      with_mask_token=True),
        head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
        target_generator=dict(type='beit_mm.DALLEEncoder', autocast_dtype='bfloat16' if tokenizer_bf16 else None),
        data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3))


def build_mmpretrain():
    from mmpretrain.models import BEiT
    return BEiT(
        backbone=dict(type='BEiTPretrainViT', arch='base', img_size=IMG, patch_size=16, drop_path_rate=0.1,
                      final_norm=True, out_type='raw', layer_scale_init_value=0.1),
        neck=None,
        head=dict(type='BEiTV1Head', embed_dims=768, num_embed=8192, loss=dict(type='CrossEntropyLoss')),
        target_generator=dict(type='DALL-E'),
        data_preprocessor=dict(type='TwoNormDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3,
                               second_mean=[-31.875] * 3, second_std=[318.75] * 3, to_rgb=True))


def make_batch(batch_size: int, device: torch.device) -> dict:
    from beit_mm.data.masking import BlockwiseMaskGenerator
    from beit_mm.models.target_generators import map_pixels
    g = torch.Generator().manual_seed(0)
    masks = BlockwiseMaskGenerator(GRID, NUM_MASKED)
    rng = np.random.default_rng(0)
    return dict(
        images=torch.randn(batch_size, 3, IMG, IMG, generator=g).to(device),
        target_images=map_pixels(torch.rand(batch_size, 3, TOK_IMG, TOK_IMG, generator=g)).to(device),
        mask=torch.from_numpy(np.stack([masks(rng) for _ in range(batch_size)])).to(device))


def step_fns(batch: dict):
    from mmpretrain.structures import DataSample
    samples = [DataSample().set_mask(m) for m in batch['mask']]
    return {
        'beit_mm BEiTPretrain': lambda m: m.loss(batch)['loss'],
        'mmpretrain BEiT': lambda m: m.loss([batch['images'], batch['target_images']], samples)['loss'],
    }


def sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_model(model, loss_fn, device: torch.device, amp: bool, warmup: int, iters: int) -> float:
    """Seconds per train step."""
    model.to(device).train()
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step():
        optim.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model)
        loss.backward()
        optim.step()

    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    return (time.perf_counter() - start) / iters


def main() -> None:
    args = parse_args()
    import beit_mm  # noqa: F401  (registers the plugin)
    import mmpretrain.models  # noqa: F401
    from mmengine.logging import MMLogger
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    MMLogger.get_instance('benchmark_mim', log_level='WARNING')  # no per-parameter init tables
    device = torch.device(args.device)
    torch.manual_seed(0)
    batch = make_batch(args.batch_size, device)
    fns = step_fns(batch)
    builders = {'beit_mm BEiTPretrain': lambda: build_beit_mm(args.tokenizer_bf16),
                'mmpretrain BEiT': build_mmpretrain}
    dtype = 'bf16 autocast' if args.amp else 'fp32'
    print(f'device {device} ({torch.get_num_threads()} threads), batch {args.batch_size}, {dtype}, '
          f'{args.warmup} warmup + {args.iters} timed steps')
    results = {}
    for name, build in builders.items():
        model = build()
        model.init_weights()
        sec = time_model(model, fns[name], device, args.amp, args.warmup, args.iters)
        results[name] = args.batch_size / sec
        print(f'  {name:22s} {results[name]:8.2f} img/s  ({sec:.2f} s/step)')
        del model
    ratio = results['beit_mm BEiTPretrain'] / results['mmpretrain BEiT']
    print(f'  ratio beit_mm / mmpretrain: {ratio:.2f}x')


if __name__ == '__main__':
    main()
