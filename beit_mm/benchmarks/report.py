"""The benchmark's Markdown: one row per model and mode with its batch, img/s, peak memory, ratios against the part's
reference (its last model), model FLOPs per image, achieved TFLOP/s and MFU (:mod:`beit_mm.benchmarks.mfu`); the FLOPs
and parameters the counter gave; the per-part split of one eager step."""
from __future__ import annotations

import torch

from beit_mm.benchmarks.kernels import CATEGORIES
from beit_mm.benchmarks.measure import Part
from beit_mm.benchmarks.mfu import Peak, achieved_tflops, mfu, step_flops_per_image


def _ratio(a: float, b: float) -> str:
    return f'x{a / max(b, 1e-12):.2f}'


def _percent(value: float | None) -> str:
    return '-' if value is None else f'{100 * value:.1f}%'


def flops_cells(counts: dict | None, train: bool, ips: float, peak: Peak | None) -> tuple[str, str, str]:
    """(forward GFLOP per image, TFLOP/s, MFU) cells of one row; FLOPs at 2 per multiply-add, a train step at 3
    forwards. A MIM model's frozen tokenizer (``frozen_macs``) is left out of the trained model's numbers and shown
    next to them ("with tokenizer": the tokenizer's forward added once)."""
    if not counts:
        return '-', '-', '-'
    macs, frozen = counts['macs'], counts.get('frozen_macs', 0)
    trained = step_flops_per_image(macs - frozen, train)
    tflops = achieved_tflops(trained, ips)
    cells = [f'{2 * (macs - frozen) / 1e9:.4g}', f'{tflops:.3g}', _percent(mfu(tflops, peak))]
    if frozen:
        whole = achieved_tflops(step_flops_per_image(macs, train, frozen), ips)
        cells[0] += f' + {2 * frozen / 1e9:.4g} tokenizer'
        cells[1] += f' ({whole:.3g} with tokenizer)'
        if peak is not None:
            cells[2] += f' ({_percent(mfu(whole, peak))} with tokenizer)'
    return tuple(cells)


def describe_peak(device: torch.device, device_name: str, kind: str, peak: Peak | None) -> str:
    """One sentence on what MFU is measured against."""
    if device.type != 'cuda':
        return 'MFU: none on a CPU (no peak table for CPUs); TFLOP/s only.'
    if peak is None:
        return (f'MFU: no dense {kind} peak known for {device_name!r}: add it to beit_mm.benchmarks.mfu (TFLOP/s only '
                'here).')
    return (f'MFU against the {peak.device} dense {kind} peak, {peak.tflops:g} TFLOP/s ({peak.source}); model FLOPs '
            'of beit_mm.evaluation.flops at 2 per multiply-add, a train step = 3 x forward.')


def markdown(results: list[tuple[Part, dict]], header: str, peak: Peak | None) -> str:
    """The tables for ``results`` (``(part, run_part's result)`` pairs) under ``header``."""
    lines = [header, '',
             '| benchmark | model | mode | batch | img/s | throughput ratio | peak MiB | memory ratio | '
             'fwd GFLOP/img | TFLOP/s | MFU |', '|---|---|---|---|---|---|---|---|---|---|---|']
    for part, res in results:
        rows = res['rows']
        names = list(dict.fromkeys(name for name, _ in rows))
        reference = names[-1]
        batch = f'{res["batch"]}{res["batch_note"]}'
        for (name, mode), r in rows.items():
            ref_mode = mode if (reference, mode) in rows else 'eager'  # peers compile only with --compile-peers
            ref = rows[reference, ref_mode]
            against = reference if ref_mode == mode else f'{reference} {ref_mode}'
            ratio = '-' if (name, mode) == (reference, ref_mode) else f'{_ratio(r["ips"], ref["ips"])} vs {against}'
            mem_ratio = '-' if (name, mode) == (reference, ref_mode) else _ratio(r['mem'], ref['mem'])
            mode_cell = mode
            if mode == 'compiled' and (name, 'eager') in rows:
                mode_cell = (f'compiled ({_ratio(r["ips"], rows[name, "eager"]["ips"])} vs eager, warm-up '
                             f'{r["warmup_s"]:.0f} s)')
            gflop, tflops, mfu_cell = flops_cells(res['flops'].get(name), part.train, r['ips'], peak)
            lines.append(f'| {part.title} | {name} | {mode_cell} | {batch} | {r["ips"]:.3f} | {ratio} | '
                         f'{r["mem"]:.0f} | {mem_ratio} | {gflop} | {tflops} | {mfu_cell} |')
        for name, why in part.skipped.items():
            lines.append(f'| {part.title} | {name} | skipped: {why} | {batch} | - | - | - | - | - | - | - |')
    counted = [(part.title, name, res['flops'][name]) for part, res in results for name in res['counted']]
    if counted:
        lines += ['', "FLOPs and parameters (beit_mm.evaluation.flops: one image at the part's size, one multiply-add "
                  '= 1 FLOP as get_flops.py prints them; the inference forward of segmentors and classifiers, no '
                  'auxiliary head; the MIM training forward with its tokenizer; slide inference: all windows of an '
                  'image; peers of the same architecture share the first model\'s count):', '',
                  '| benchmark | model | GFLOPs | of which tokenizer | parameters (M) |', '|---|---|---|---|---|']
        lines += [f'| {title} | {name} | {c["macs"] / 1e9:.4g} | {c["frozen_macs"] / 1e9:.4g} | '
                  f'{c["params"] / 1e6:.4g} |' for title, name, c in counted]
    profiled = [(part.title, name, mode, r['categories']) for part, res in results
                for (name, mode), r in res['rows'].items() if r.get('categories')]
    if profiled:
        lines += ['', "Device time of one step by kernel category (torch.profiler; ms and share of the kernels' "
                  'time; busy = kernel time over the profiled wall time):', '',
                  '| benchmark | model | mode | ' + ' | '.join(CATEGORIES) + ' | kernels ms | busy | attention kernels |',
                  '|---|---|---|' + '---|' * (len(CATEGORIES) + 3)]
        for title, name, mode, c in profiled:
            total = max(c['total'], 1e-9)
            cells = ' | '.join(f'{c["ms"][k]:.1f} ({c["ms"][k] / total:.0%})' for k in CATEGORIES)
            kernels = '; '.join(f'{n[:60]} {t:.1f}' for n, t in c['attention_kernels'][:3]) or '-'
            busy = f'{c["total"] / c["wall_ms"]:.0%}' if c.get('wall_ms') else '-'
            lines.append(f'| {title} | {name} | {mode} | {cells} | {c["total"]:.1f} | {busy} | {kernels} |')
    splits = [(part.title, name, mode, r['split']) for part, res in results
              for (name, mode), r in res['rows'].items() if r.get('split')]
    if splits:
        lines += ['', 'Time per step by part, seconds (share of the step; one eager step):', '',
                  '| benchmark | model | tokenizer | backbone | neck + head | optimizer | other | step |',
                  '|---|---|---|---|---|---|---|---|']
        for title, name, mode, s in splits:
            cells = ' | '.join(f'{s[k]:.2f} ({s[k] / s["total"]:.0%})' for k in
                               ('tokenizer', 'backbone', 'neck + head', 'optimizer', 'other'))
            lines.append(f'| {title} | {name} | {cells} | {s["total"]:.2f} |')
    return '\n'.join(lines)
