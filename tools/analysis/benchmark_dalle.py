"""Throughput of the DALL-E tokenizer (``beit_mm.DALLEEncoder``, real size) in fp32, channels_last and bf16 autocast.

All variants share one set of (random) weights and run in this process on the same inputs; the script prints
images/s, the ratio to plain fp32 NCHW, and how many token ids each variant changes relative to fp32 (random weights
make near-ties likelier than the released ones, so read that column as an upper bound). On a CPU without native bf16
(no AVX512-BF16/AMX) the bf16 variants are left out unless ``--variants`` names them: emulated bf16 is ~70x slower there
and times nothing a user would run (``--amp`` keeps fp32 on such a CPU).

    PYTHONPATH=. python tools/analysis/benchmark_dalle.py --batch 8 --size 112 --iters 3
"""
import argparse
import time

import torch

VARIANTS = {
    'fp32 NCHW': dict(channels_last=False, autocast_dtype=None),
    'fp32 channels_last': dict(channels_last=True, autocast_dtype=None),
    'bf16 NCHW': dict(channels_last=False, autocast_dtype='bfloat16'),
    'bf16 channels_last': dict(channels_last=True, autocast_dtype='bfloat16'),
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--size', type=int, default=112, help='input side; 112 is BEiT\'s tokenizer view')
    parser.add_argument('--iters', type=int, default=3, help='timed forward passes per variant')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--variants', nargs='+', choices=list(VARIANTS),
                        help='default: all, without bf16 on a CPU that has no native bf16')
    return parser.parse_args()


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def main() -> None:
    args = parse_args()
    from beit_mm.engine.amp_optim_wrapper import cpu_has_native_bf16, describe_cpu
    from beit_mm.models.tokenizers.dalle import DALLEEncoder, map_pixels
    device = torch.device(args.device)
    torch.manual_seed(0)
    state = DALLEEncoder(channels_last=False).state_dict()
    x = map_pixels(torch.rand(args.batch, 3, args.size, args.size, generator=torch.Generator().manual_seed(0)))
    x = x.to(device)
    if args.variants is None:
        args.variants = list(VARIANTS)
        if device.type == 'cpu' and not cpu_has_native_bf16():
            args.variants = [name for name in VARIANTS if VARIANTS[name]['autocast_dtype'] is None]
            print(f'bf16 variants left out: {describe_cpu()} (emulated bf16; name them with --variants to time them)')
    print(f'device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch} at '
          f'{args.size}x{args.size}, {args.iters} timed iters after {args.warmup} warm-up', flush=True)

    results: dict[str, tuple[float, torch.Tensor]] = {}
    for name in args.variants:
        model = DALLEEncoder(**VARIANTS[name])
        model.load_state_dict(state, strict=True)
        model.to(device)
        for _ in range(args.warmup):
            model.get_token_ids(x)
        _sync(device)
        start = time.perf_counter()
        for _ in range(args.iters):
            ids = model.get_token_ids(x)
        _sync(device)
        seconds = (time.perf_counter() - start) / args.iters
        results[name] = (args.batch / seconds, ids.cpu())
        print(f'  {name}: {args.batch / seconds:.2f} img/s', flush=True)
        del model

    base_name = args.variants[0]
    base_speed, base_ids = results[base_name]
    print(f'{"variant":<20} {"img/s":>8} {"x " + base_name:>14} {"ids != " + base_name:>20}')
    for name, (speed, ids) in results.items():
        changed = (ids != base_ids).float().mean().item()
        print(f'{name:<20} {speed:8.2f} {speed / base_speed:14.2f} {changed:20.2%}')


if __name__ == '__main__':
    main()
