"""BEiT attention kernels: time of each kernel per device, dtype and mode, and their agreement (the kernel table).

    python tools/analysis/benchmark_attention.py [--device cuda] [--tokens 197 1601] [--batch 8 1]
                                                 [--impls eager sdpa flex cudnn] [--compile] [--check]

For each token count N (197 = 224 px, 1601 = 640 px at patch 16) one ``BEiTAttention`` of BEiT-B (768 wide, 12
heads, a learnable relative position bias) runs forward + backward ("train") and forward under ``no_grad``
("inference") with each ``attn_impl`` of ``--impls`` (default: eager, sdpa and flex; cudnn too on CUDA), in fp32 and
under the autocast dtype of ``--amp``; ``--compile`` times each module under ``torch.compile`` (how FlexAttention is
meant to run; on CPU its uncompiled form is a reference loop). FlexAttention has no CPU backward in torch 2.13: its
CPU train cells say so. Prints a Markdown table: milliseconds per call, each kernel's time over eager's and what
``'auto'`` picks; with ``--check`` also the largest difference of each kernel's output and input/bias gradients from
eager's, and whether it is within the stated tolerance (fp32: 1e-5 absolute on outputs, 1e-4 on gradients;
bf16/fp16: each kernel's error against fp32 eager, at most max(2e-2 of the values' scale, twice eager's)). A kernel
that raises (a compile error, an unsupported input) is a row with its error and the table goes on; FlexAttention's
cells say which kernel option set ran, or that it fell back to SDPA. Exits 1 when a check fails or a kernel raised,
after the whole table. Nothing here is asserted by tests except through ``tools/analysis/gpu_report.sh --dry-run``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

TOLERANCE = {torch.float32: (1e-5, 1e-4)}  # (output, gradients), absolute
LOW_PRECISION_REL_TOL = 2e-2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--tokens', type=int, nargs='+', default=[197, 1601], help='patch grid side**2 + 1 values')
    parser.add_argument('--batch', type=int, nargs='+', default=[8, 1], help='batch per --tokens entry')
    parser.add_argument('--embed-dims', type=int, default=768)
    parser.add_argument('--heads', type=int, default=12)
    parser.add_argument('--iters', type=int, default=5)
    parser.add_argument('--rounds', type=int, default=3, help='alternations of the kernels; medians are reported')
    parser.add_argument('--dtypes', nargs='+', choices=['fp32', 'amp'], default=['fp32', 'amp'],
                        help="fp32 and/or the autocast dtype of tools/train.py --amp on this device")
    parser.add_argument('--impls', nargs='+', choices=['eager', 'sdpa', 'flex', 'cudnn'], default=None,
                        help='kernels to time and check (default: eager sdpa flex, plus cudnn on CUDA)')
    parser.add_argument('--compile', action='store_true', help='torch.compile each attention module first')
    parser.add_argument('--check', action='store_true',
                        help='also compare each kernel with eager (exit 1 on a mismatch)')
    parser.add_argument('--no-timing', dest='timing', action='store_false', help='only --check')
    return parser.parse_args()


def describe_error(error: BaseException) -> str:
    """One table cell for a kernel that raised: the exception's type and first line, without table separators."""
    first = (str(error).strip().splitlines() or [''])[0][:200].replace('|', '/')
    return f'error: {type(error).__name__}: {first}'


def ran_as(impl: str, device: torch.device, dtype, args, train: bool) -> str:
    """What ``'flex'`` ran as: the kernel option set its probe chose, or SDPA where none compiled (else '')."""
    if impl != 'flex':
        return ''
    from beit_mm.models.layers.attention import flex_plan
    plan = flex_plan(device.type, device.index or 0, str(dtype or torch.float32), args.embed_dims // args.heads,
                     train)
    return ' (ran as sdpa: flex did not compile)' if plan < 0 else f' (kernel options {plan})'


def grid_for(tokens: int) -> tuple[int, int]:
    side = round((tokens - 1) ** 0.5)
    if side * side + 1 != tokens:
        raise ValueError(f'--tokens {tokens} is not side**2 + 1 (e.g. 197 for 14x14, 1601 for 40x40)')
    return side, side


def make(impl: str, args, grid, device, seed: int = 0):
    from beit_mm.models.layers import BEiTAttention
    torch.manual_seed(seed)
    attn = BEiTAttention(args.embed_dims, args.heads, grid=grid, attn_impl=impl).to(device)
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.2 if p.dim() == 1 else 0.05)
    if args.compile:
        attn.compile(fullgraph=True, dynamic=False)
    return attn


def trains(impl: str, device: torch.device) -> bool:
    """Whether the kernel has a backward on the device (FlexAttention has none on CPU in torch 2.13)."""
    return not (impl == 'flex' and device.type == 'cpu')


def call(attn, x, grid, dtype, train: bool) -> torch.Tensor:
    with torch.autocast(x.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        if train:
            out = attn(x, grid)
            out.float().square().mean().backward()
        else:
            with torch.no_grad():
                out = attn(x, grid)
    return out


def time_ms(attn, x, grid, dtype, train, iters) -> float:
    sync = torch.cuda.synchronize if x.device.type == 'cuda' else (lambda: None)
    call(attn, x, grid, dtype, train)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        call(attn, x, grid, dtype, train)
    sync()
    return (time.perf_counter() - start) / iters * 1000


def check(args, impl, tokens, batch, device, dtype) -> tuple[str, bool]:
    """Largest |kernel - eager| of the output and of the input and bias-table gradients (the output only where the
    kernel has no backward on the device).

    fp32: absolute bounds (:data:`TOLERANCE`). bf16/fp16: both kernels round differently (the memory-efficient kernel
    accumulates in fp32, eager rounds each product), so their difference alone says little; each is compared with
    the fp32 eager result and SDPA passes when its error is at most ``LOW_PRECISION_REL_TOL`` of the values' scale
    or at most twice eager's own error, i.e. it is no less accurate than the path it replaces.
    """
    grid = grid_for(tokens)

    train = trains(impl, device)

    def run(kernel, run_dtype):
        attn = make(kernel, args, grid, device)
        x = torch.randn(batch, tokens, args.embed_dims, generator=torch.Generator().manual_seed(1)).to(device)
        x.requires_grad_(train)
        out = call(attn, x, grid, run_dtype, train)
        if not train:
            return out.detach().float(), torch.zeros(1, device=device), torch.zeros(1, device=device)
        return out.detach().float(), x.grad.float(), attn.relative_position_bias_table.grad.float()

    def max_diff(a, b):
        return [(u - v).abs().max().item() for u, v in zip(a, b)]

    eager, sdpa = run('eager', dtype), run(impl, dtype)
    d_out, d_x, d_bias = max_diff(sdpa, eager)
    if dtype is None:
        d_grad = max(d_x, d_bias)
        tol_out, tol_grad = TOLERANCE[torch.float32]
        ok = d_out <= tol_out and d_grad <= tol_grad
        return f'{d_out:.2e} | {d_grad:.2e} | {tol_out:g} / {tol_grad:g} abs | {"ok" if ok else "FAIL"}', ok
    ref = run('eager', None)
    scales = [max(t.abs().max().item(), 1e-30) for t in ref]
    err_sdpa = [d / s for d, s in zip(max_diff(sdpa, ref), scales)]
    err_eager = [d / s for d, s in zip(max_diff(eager, ref), scales)]
    ok = all(es <= max(LOW_PRECISION_REL_TOL, 2 * ee) for es, ee in zip(err_sdpa, err_eager))
    d_out, d_grad = d_out / scales[0], max(d_x / scales[1], d_bias / scales[2])
    errs = ', '.join(f'{n} {es:.1e}/{ee:.1e}' for n, es, ee in zip(('out', 'dx', 'dbias'), err_sdpa, err_eager))
    tol = f'vs fp32, {impl}/eager: {errs}; <= max({LOW_PRECISION_REL_TOL:g}, 2 x eager)'
    return f'{d_out:.2e} | {d_grad:.2e} | {tol} | {"ok" if ok else "FAIL"}', ok


def main() -> None:
    args = parse_args()
    from beit_mm.engine.amp_optim_wrapper import amp_dtype_for_device
    from beit_mm.models.layers.attention import select_attn_impl
    device = torch.device(args.device)
    if len(args.batch) != len(args.tokens):
        raise SystemExit('--batch needs one value per --tokens value')
    impls = args.impls or ['eager', 'sdpa', 'flex'] + (['cudnn'] if device.type == 'cuda' else [])
    if 'cudnn' in impls and device.type != 'cuda':
        raise SystemExit('--impls cudnn needs a CUDA device (cuDNN attention)')
    impls = ['eager'] + [impl for impl in impls if impl != 'eager']
    dtypes = ([None] if 'fp32' in args.dtypes else []) + (
        [amp_dtype_for_device(device.type)] if 'amp' in args.dtypes and amp_dtype_for_device(device.type) else [])
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'CPU, {torch.get_num_threads()} threads'
    print(f'BEiTAttention {args.embed_dims} wide, {args.heads} heads, relative position bias; {name}, '
          f'torch {torch.__version__}{", compiled" if args.compile else ""}\n')
    all_ok = True
    if args.timing:
        others = impls[1:]
        print('| N | batch | dtype | mode | ' + ' | '.join(f'{i} ms' for i in impls) + ' | '
              + ' | '.join(f'{i} / eager' for i in others) + ' | auto picks |')
        print('|---|---|---|---|' + '---|' * (len(impls) + len(others) + 1))
        for tokens, batch in zip(args.tokens, args.batch):
            grid = grid_for(tokens)
            for dtype in dtypes:
                for train in (True, False):
                    kernels = {impl: make(impl, args, grid, device) for impl in impls
                               if not train or trains(impl, device)}
                    x = torch.randn(batch, tokens, args.embed_dims, device=device, requires_grad=train)
                    ms = {impl: [] for impl in kernels}
                    failed = {}
                    for _ in range(args.rounds):
                        for impl, attn in kernels.items():
                            if impl in failed:
                                continue
                            try:
                                ms[impl].append(time_ms(attn, x, grid, dtype, train, args.iters))
                            except Exception as error:  # noqa: BLE001 -- a failing kernel is a row, not the end
                                failed[impl] = describe_error(error)
                    all_ok &= not failed
                    med = {impl: statistics.median(v) for impl, v in ms.items() if impl not in failed}
                    cells = [f'{med[i]:.1f}{ran_as(i, device, dtype, args, train)}' if i in med
                             else failed.get(i, 'no backward') for i in impls]
                    ratios = [f'x{med[i] / med["eager"]:.2f}' if i in med and 'eager' in med else '-' for i in others]
                    dt = str(dtype or torch.float32).replace('torch.', '')
                    print(f'| {tokens} | {batch} | {dt} | {"train" if train else "inference"} | ' + ' | '.join(cells)
                          + ' | ' + ' | '.join(ratios) + f' | {select_attn_impl(device.type, train, dtype or torch.float32)} |', flush=True)
    if args.check:
        print('\n| kernel | N | batch | dtype | max diff output (vs eager) | max diff gradients | tolerance | result |')
        print('|---|---|---|---|---|---|---|---|')
        for impl in impls[1:]:
            for tokens, batch in zip(args.tokens, args.batch):
                for dtype in dtypes:
                    try:
                        row, ok = check(args, impl, tokens, batch, device, dtype)
                        row = row.replace(' | ', f'{ran_as(impl, device, dtype, args, trains(impl, device))} | ', 1)
                    except Exception as error:  # noqa: BLE001 -- reported as the kernel's row; the table goes on
                        row, ok = f'- | - | - | FAIL: {describe_error(error)}', False
                    if not trains(impl, device):
                        row = row.replace(' | ', ' (forward only: no backward on this device) | ', 1)
                    all_ok &= ok
                    print(f'| {impl} | {tokens} | {batch} | {str(dtype or torch.float32).replace("torch.", "")} | '
                          f'{row} |', flush=True)
    sys.exit(0 if all_ok else 1)


if __name__ == '__main__':
    main()
