"""channels_last for the neck and heads of beit_mm's BEiT-B UPerNet: one train step (forward, backward) in NCHW vs
channels_last, alternating, best of the rounds; fp32 or bf16 autocast (``--amp``). The model, inputs and step are
those of ``benchmark.py --parts seg<SIZE>`` (BatchNorm in eval mode, batch 1).

    python tools/analysis/benchmark_channels_last.py --size 512 [--amp] [--rounds 2]
"""
import argparse
import os.path as osp
import time

import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size', type=int, default=512)
    parser.add_argument('--amp', action='store_true', help='bf16 autocast')
    parser.add_argument('--rounds', type=int, default=2)
    args = parser.parse_args()
    from beit_mm.benchmarks.measure import build_part_model
    from beit_mm.benchmarks.parts import seg_part

    part = seg_part(ROOT, args.size)
    model = build_part_model(part, 'beit_mm', torch.device('cpu'))
    inputs = part.make_inputs(1, torch.device('cpu'))

    def step() -> float:
        start = time.perf_counter()
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=args.amp):
            loss = part.step(model, True, inputs)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    times = {'NCHW': [], 'channels_last': []}
    for r in range(args.rounds):
        for layout, fmt in (('NCHW', torch.contiguous_format), ('channels_last', torch.channels_last)):
            for name in ('neck', 'decode_head', 'auxiliary_head'):
                getattr(model, name).to(memory_format=fmt)
            step()  # warm-up after the layout change
            times[layout].append(step())
            print(f'round {r + 1} {layout}: {times[layout][-1]:.2f} s', flush=True)
    best = {k: min(v) for k, v in times.items()}
    print(f'size {args.size}, {"bf16" if args.amp else "fp32"}, {torch.get_num_threads()} threads: NCHW '
          f'{best["NCHW"]:.2f} s, channels_last {best["channels_last"]:.2f} s, channels_last speed-up '
          f'x{best["NCHW"] / best["channels_last"]:.2f}')


if __name__ == '__main__':
    main()
