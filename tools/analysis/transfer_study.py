"""The MIM study on several datasets in one command: does a result on one dataset hold on another?

    python tools/analysis/transfer_study.py [--datasets shapes digits] [--arms scratch vqkd-blockwise vqkd-supervised]
        [--heads upernet linear] [--seeds 0 1 2] [--jobs 2] [--data-dir data] [--work-dir work_dirs/transfer_study]
        [--num-train N] [--num-val N] [--num-unlabeled N] [MIM_STUDY_OPTION ...]

For every dataset (:data:`DATASETS`): the labeled set and the unlabeled pool are written by the project's data tool
(``beit_mm.data.demo.make_demo_ade20k``: ``<data-dir>/<folder>`` with raw ids 1..K in ADE20K layout, ``<data-dir>/
<folder>_unlabeled``; a root that is not the tool's own is refused, never overwritten), then
``tools/analysis/mim_study.py`` runs on them with the same arms, heads, seeds and budgets into
``<work-dir>/<folder>/`` (its own ``report.md``/``report.json``; finished runs are reused). The ``vqkd-supervised``
arm's teacher learns the labels of the *next* dataset in ``--datasets`` (shapes for the digits, digits for the shapes):
a teacher that knows something the pretraining pool does not, as CLIP does for BEiT v2. Options this tool does not
know (``--mim-iters 3000``, ``--ft-options ...``) go to every study unchanged.

``<work-dir>/report.md`` (also printed) holds, for every arm and decoder, the difference to scratch on each dataset
with its spread (the sum of the two standard deviations over seeds), the scratch and majority-class mIoU beside it,
and the verdict per dataset: ``gain`` / ``loss`` when the difference is larger than the spread, else ``within
spread`` (the frozen probe against random init: ``learned`` from the study's warning margin of 1 point); then each
dataset's own tables. A result that holds on one dataset only is reported as such.

Datasets (64 px, 2 cores, ~1.5 h each for the three default arms and both decoders):

- ``shapes``: 7 classes named by the outline of objects of random colour and texture on a flat background (300
  labeled + 300 validation images, 3000 unlabeled).
- ``digits``: scikit-learn's bundled UCI handwritten digits, four per image on a noisy textured background, label =
  digit + 1 on ink (10 classes; 400 labeled + 100 validation images from glyphs never used in training, 3000
  unlabeled).
- ``digits-dark`` (folder ``digits_dark``, not in the default ``--datasets``): the same digits in dark ink on light
  paper; the colour-ink digits defeat a from-scratch study model at this budget, these do not.
"""
from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)

# name (make_demo_data.py's --dataset) -> the demo style that writes it, its class count K (raw ids 1..K), its
# default sizes and its folder under --data-dir and --work-dir (make_demo_data.py's default root's)
DATASETS = {
    'shapes': dict(style='shapes', num_classes=7, num_train=300, num_val=300, num_unlabeled=3000, folder='shapes'),
    'digits': dict(style='digits', num_classes=10, num_train=400, num_val=100, num_unlabeled=3000, folder='digits'),
    'digits-dark': dict(style='digits-dark', num_classes=10, num_train=400, num_val=100, num_unlabeled=3000,
                        folder='digits_dark'),
}
DEFAULT_DATASETS = ('shapes', 'digits')
IMAGE_SIZE = 64


def make_data(name: str, args) -> tuple[str, str]:
    """Write (or reuse) the labeled root and the unlabeled pool of dataset ``name``; return their paths."""
    from beit_mm.data.demo import make_demo_ade20k
    spec = DATASETS[name]
    labeled = make_demo_ade20k(osp.join(args.data_dir, spec['folder']), args.num_train or spec['num_train'],
                               spec['num_val'] if args.num_val is None else args.num_val, IMAGE_SIZE, seed=0,
                               style=spec['style'])
    unlabeled = make_demo_ade20k(osp.join(args.data_dir, f"{spec['folder']}_unlabeled"),
                                 args.num_unlabeled or spec['num_unlabeled'], 0, IMAGE_SIZE, seed=1,
                                 style=spec['style'], with_annotations=False)
    return labeled, unlabeled


def run_study(name: str, roots: dict[str, tuple[str, str]], args, extra: list[str]) -> dict:
    """``mim_study.py`` on dataset ``name`` (its teacher dataset: the next in ``--datasets``); its report.json."""
    labeled, unlabeled = roots[name]
    work = osp.join(args.work_dir, DATASETS[name]['folder'])
    cmd = [sys.executable, osp.join(ROOT, 'tools', 'analysis', 'mim_study.py'), '--labeled-root', labeled,
           '--unlabeled-root', unlabeled, '--num-classes', str(DATASETS[name]['num_classes']), '--arms', *args.arms,
           '--heads', *args.heads, '--seeds', *map(str, args.seeds), '--jobs', str(args.jobs), '--work-dir', work]
    if 'vqkd-supervised' in args.arms:
        other = args.datasets[(args.datasets.index(name) + 1) % len(args.datasets)]
        cmd += ['--teacher-labeled-root', roots[other][0], '--teacher-num-classes',
                str(DATASETS[other]['num_classes'])]
    from beit_mm.fileio.outputs import atomic_file
    log_path = osp.join(work, 'study.log')
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    start = time.time()
    with atomic_file(log_path) as tmp, open(tmp, 'w') as log:  # .study.log.<pid>.part while the study runs
        proc = subprocess.run(cmd + extra, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise SystemExit(f'{tail}\ntransfer_study: the study on {name} failed (exit {proc.returncode}); full log: '
                         f'{log_path}')
    print(f'[transfer_study] {name}: done in {(time.time() - start) / 60:.1f} min; {work}/report.md', flush=True)
    with open(osp.join(work, 'report.json')) as f:
        return json.load(f)


def verdict(diff: float, spread: float) -> str:
    """``gain`` / ``loss`` when ``|diff|`` is larger than ``spread`` (the sum of the two standard deviations)."""
    if abs(diff) <= spread:
        return 'within spread'
    return 'gain' if diff > 0 else 'loss'


def comparisons(report: dict) -> dict[tuple[str, str], dict]:
    """``{(arm, head): {diff, spread, verdict, arm, scratch}}``: each arm's mean mIoU minus scratch's, per decoder,
    from one study's report.json; plus ``(arm, 'probe')``: the frozen probe's mIoU minus random init's, ``learned``
    when it gains ``mim_study.PROBE_MIN_GAIN`` points (the study's warning margin; one pretraining run per arm)."""
    from mim_study import PROBE_MIN_GAIN, mean_std  # noqa: E402 (tools/analysis on sys.path)
    results = report['results']
    out = {}
    for arm in (a for a in results if a != 'scratch'):
        for head in report['args']['heads']:
            m0, s0 = mean_std([r['mIoU'] for r in results['scratch']['finetune'][head]])
            m1, s1 = mean_std([r['mIoU'] for r in results[arm]['finetune'][head]])
            out[arm, head] = dict(diff=m1 - m0, spread=s1 + s0, verdict=verdict(m1 - m0, s1 + s0), arm=m1, scratch=m0)
        p0, q0 = mean_std([p['probe_mIoU'] for p in results['scratch']['probe']])
        p1, q1 = mean_std([p['probe_mIoU'] for p in results[arm]['probe']])
        learned = 'learned' if p1 - p0 >= PROBE_MIN_GAIN else 'nothing the probe sees'  # the study's warning margin
        out[arm, 'probe'] = dict(diff=p1 - p0, spread=q1 + q0, verdict=learned, arm=p1, scratch=p0)
    return out


def summary(reports: dict[str, dict]) -> str:
    """The cross-dataset table and one 'holds on / fails on' line per arm and decoder."""
    names = list(reports)
    table = {name: comparisons(report) for name, report in reports.items()}
    keys = list(table[names[0]])
    lines = ['| arm | decoder | ' + ' | '.join(f'{n}: arm - scratch (spread) | {n}: verdict' for n in names) + ' |',
             '|---|---|' + '---|---|' * len(names)]
    for arm, head in keys:
        cells = []
        for name in names:
            c = table[name][arm, head]
            cells += [f'{c["diff"]:+.2f} ({c["spread"]:.2f}; {c["arm"]:.2f} vs {c["scratch"]:.2f})', c['verdict']]
        what = 'frozen probe vs random init' if head == 'probe' else head
        lines.append(f'| {arm} | {what} | ' + ' | '.join(cells) + ' |')
    lines += ['', 'Majority-class mIoU (the trivial baseline of every fine-tuning row): ' + ', '.join(
        f'{name} {report["baseline"]["mIoU"]:.2f}' for name, report in reports.items()) + '.', '']
    for arm, head in keys:
        if head == 'probe':
            continue
        by = {v: [n for n in names if table[n][arm, head]['verdict'] == v] for v in ('gain', 'loss', 'within spread')}
        parts = [f'{v} on {", ".join(ns)}' for v, ns in by.items() if ns]
        scope = 'on every dataset here' if len(set(table[n][arm, head]['verdict'] for n in names)) == 1 else \
            'so it does not transfer across these datasets'
        lines.append(f'- {arm} vs scratch, {head}: {"; ".join(parts)} ({scope}).')
    return '\n'.join(lines) + '\n'


def parse_args() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description='The MIM study on several datasets, one table each and a summary')
    parser.add_argument('--datasets', nargs='+', choices=tuple(DATASETS), default=list(DEFAULT_DATASETS))
    parser.add_argument('--arms', nargs='+', default=['scratch', 'vqkd-blockwise', 'vqkd-supervised'])
    parser.add_argument('--heads', nargs='+', default=['upernet', 'linear'])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--jobs', type=int, default=2, help='runs at a time within each study')
    parser.add_argument('--data-dir', default='data', help='where the datasets are written (or reused)')
    parser.add_argument('--work-dir', default='work_dirs/transfer_study')
    parser.add_argument('--num-train', type=int, default=None, help='labeled training images (default per dataset)')
    parser.add_argument('--num-val', type=int, default=None, help='validation images (default per dataset)')
    parser.add_argument('--num-unlabeled', type=int, default=None, help='unlabeled images (default per dataset)')
    args, extra = parser.parse_known_args()
    if 'scratch' not in args.arms:
        parser.error('--arms needs scratch: every result is a difference to it')
    if 'vqkd-supervised' in args.arms and len(args.datasets) < 2:
        parser.error('the vqkd-supervised arm needs two datasets or more: its teacher learns the next one\'s labels')
    args.work_dir, args.data_dir = osp.abspath(args.work_dir), osp.abspath(args.data_dir)
    return args, extra


def main() -> None:
    args, extra = parse_args()
    sys.path.insert(0, osp.join(ROOT, 'tools', 'analysis'))
    from beit_mm.fileio.demo_root import NotADemoRootError
    from beit_mm.fileio.outputs import OutputError, atomic_file, check_output
    start = time.time()
    data_roots = [osp.join(args.data_dir, DATASETS[n]['folder'] + suffix) for n in args.datasets
                  for suffix in ('', '_unlabeled')]
    try:  # a folder of studies it reuses: it may exist, never be a link or lie in the data
        check_output(args.work_dir, overwrite=True, kind='dir', inputs=data_roots)
        roots = {name: make_data(name, args) for name in args.datasets}
    except (NotADemoRootError, OutputError) as error:
        raise SystemExit(f'transfer_study: {error}')
    reports = {name: run_study(name, roots, args, extra) for name in args.datasets}
    text = [f'# MIM study on {len(reports)} datasets: {", ".join(reports)}', '',
            f'Arms {args.arms}, decoders {args.heads}, seeds {args.seeds}; the same budgets on every dataset '
            f'({" ".join(extra) or "mim_study.py defaults"}). Wall time {(time.time() - start) / 60:.1f} min with '
            f'--jobs {args.jobs}. Each cell: arm - scratch in mIoU points, (the sum of the two standard deviations; '
            'arm vs scratch means); verdict gain/loss only when the difference is larger than that spread.', '',
            summary(reports)]
    for name in reports:
        with open(osp.join(args.work_dir, DATASETS[name]['folder'], 'report.md')) as f:
            text += [f'## {name}', '', f.read().replace('\n# ', '\n### ').removeprefix('# ')]
    out = '\n'.join(text)
    with atomic_file(osp.join(args.work_dir, 'report.md')) as tmp, open(tmp, 'w') as f:
        f.write(out)
    print(out)


if __name__ == '__main__':
    main()
