"""Latency of a ``tools/export.py`` ONNX model (onnxruntime, CPU) next to the PyTorch model it came from, and their
parity on the same inputs.

    python tools/analysis/benchmark_onnx.py CONFIG [--checkpoint CKPT] --shape H W [--rounds 5] [--threads N]

Without ``--checkpoint`` the model has random weights (its own init; BatchNorm statistics and relative position
biases randomized so that they matter). Prints, for the exported part (segmentor/classifier/backbone, see
``tools/export.py``): max |diff| of the outputs and whether the argmax maps agree on ``--inputs`` random images,
then the median time of one forward (batch 1) of PyTorch (eval, ``torch.no_grad``, the kernels ``attn_impl='auto'``
picks) and of onnxruntime (all graph optimizations), measured in alternating rounds in this process with the same
number of threads, and the ratio PyTorch / onnxruntime (> 1: ONNX is faster).
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import statistics
import tempfile
import time

import torch


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('--checkpoint', default=None, help='trained weights (default: random)')
    parser.add_argument('--shape', type=int, nargs=2, required=True, metavar=('H', 'W'))
    parser.add_argument('--rounds', type=int, default=5, help='timed rounds per runtime (after one warm-up)')
    parser.add_argument('--inputs', type=int, default=3, help='random images for the parity check')
    parser.add_argument('--threads', type=int, default=torch.get_num_threads(), help='intra-op threads of both')
    parser.add_argument('--out', default=None, help='keep the ONNX file here (default: a temporary file)')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
    return parser.parse_args()


def randomize(model: torch.nn.Module, seed: int = 0) -> None:
    """BatchNorm statistics and relative position bias tables away from their neutral init (0 / 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 1.5 + 0.5)
        for name, p in model.named_parameters():
            if 'relative_position_bias_table' in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def main() -> None:
    args = parse_args()
    from mmengine.config import Config
    import onnxruntime as ort

    from beit_mm.apis import build_from_config, load_model, resolve_checkpoint
    from beit_mm.apis.export import (INPUT_NAME, compare_outputs, describe_comparison, export_module, export_onnx,
                                     model_kind)
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError, check_output
    if args.out:
        try:  # before the export: the kept file is checked as tools/export.py's --out
            check_output(args.out, args.overwrite,
                         inputs=[args.config, resolve_checkpoint(args.checkpoint) if args.checkpoint else None])
        except (OutputError, FileNotFoundError) as error:
            raise refusal('benchmark_onnx.py', error) from None
    torch.set_num_threads(args.threads)
    cfg = Config.fromfile(args.config)
    kind = model_kind(cfg)
    if args.checkpoint:
        model, cfg = load_model(args.config, args.checkpoint)
    else:
        torch.manual_seed(0)
        model = build_from_config(cfg)
        randomize(model)
    shape = tuple(args.shape)
    module = export_module(model, kind, shape)
    out = args.out or osp.join(tempfile.mkdtemp(), 'model.onnx')
    start = time.perf_counter()
    export_onnx(model, kind, shape, out)
    print(f'{osp.basename(args.config)} {kind} at {shape[0]}x{shape[1]}: exported in '
          f'{time.perf_counter() - start:.0f} s ({osp.getsize(out) / 1e6:.0f} MB), {args.threads} threads')
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(out, options, providers=['CPUExecutionProvider'])

    results = []
    for seed in range(args.inputs):
        x = torch.randn(1, 3, *shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            ref = module(x)
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        results.append(compare_outputs(session.run(None, {INPUT_NAME: x.numpy()}), [r.numpy() for r in ref]))
    total = {key: (max if key == 'max_abs_diff' else sum)(r[key] for r in results) for key in results[0]}
    print(f'parity on {args.inputs} random inputs (fp32): {describe_comparison(total)}')

    x = torch.randn(1, 3, *shape)
    feed = {INPUT_NAME: x.numpy()}
    times: dict[str, list[float]] = {'pytorch': [], 'onnxruntime': []}
    with torch.no_grad():
        module(x)
        session.run(None, feed)
        for _ in range(args.rounds):
            t = time.perf_counter()
            module(x)
            times['pytorch'].append(time.perf_counter() - t)
            t = time.perf_counter()
            session.run(None, feed)
            times['onnxruntime'].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f'latency, batch 1, median of {args.rounds}: PyTorch {med["pytorch"] * 1e3:.1f} ms, onnxruntime '
          f'{med["onnxruntime"] * 1e3:.1f} ms, ratio PyTorch/onnxruntime {med["pytorch"] / med["onnxruntime"]:.2f}')
    if args.out is None:
        os.remove(out)


if __name__ == '__main__':
    main()
