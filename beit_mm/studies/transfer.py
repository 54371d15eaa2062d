"""The MIM study on several datasets: does a result on one dataset hold on another?

For every dataset (:data:`DATASETS`) the labeled set and the unlabeled pool are written (:func:`make_data`) and the
MIM study runs on them (:func:`run_study`; the ``vqkd-supervised`` arm's teacher learns the labels of the next
dataset). :func:`summary` compares every arm with scratch per dataset: ``gain`` or ``loss`` only beyond the sum of the
two standard deviations over seeds, the frozen probe ``learned`` from
:data:`beit_mm.studies.report.PROBE_MIN_GAIN` points over random init.
"""
from __future__ import annotations

import os.path as osp
import time

from beit_mm.fileio.json_file import read_json
from beit_mm.fileio.text_file import TextFileError, read_bounded

from .report import PROBE_MIN_GAIN, mean_std
from .settings import MimStudySettings, TransferStudySettings


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


def make_data(name: str, args: TransferStudySettings) -> tuple[str, str]:
    """Write (or reuse) the labeled root and the unlabeled pool of dataset ``name``; return their paths."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    spec = DATASETS[name]
    labeled = make_demo_ade20k(osp.join(args.data_dir, spec['folder']), args.num_train or spec['num_train'],
                               spec['num_val'] if args.num_val is None else args.num_val, IMAGE_SIZE, seed=0,
                               style=spec['style'])
    unlabeled = make_demo_ade20k(osp.join(args.data_dir, f"{spec['folder']}_unlabeled"),
                                 args.num_unlabeled or spec['num_unlabeled'], 0, IMAGE_SIZE, seed=1,
                                 style=spec['style'], with_annotations=False)
    return labeled, unlabeled


def study_settings(name: str, roots: dict[str, tuple[str, str]], args: TransferStudySettings) -> MimStudySettings:
    """The MIM study's settings on dataset ``name``: its roots and class count, the arms, heads, seeds and jobs of
    ``args``, ``args.mim_options`` unchanged, the work dir ``<work dir>/<folder>``, and with ``vqkd-supervised`` the
    next dataset in ``args.datasets`` as its teacher's labels."""
    labeled, unlabeled = roots[name]
    teacher = {}
    if 'vqkd-supervised' in args.arms:
        other = args.datasets[(args.datasets.index(name) + 1) % len(args.datasets)]
        teacher = dict(teacher_labeled_root=roots[other][0], teacher_num_classes=DATASETS[other]['num_classes'])
    return MimStudySettings(labeled_root=labeled, unlabeled_root=unlabeled, num_classes=DATASETS[name]['num_classes'],
                            arms=args.arms, heads=args.heads, seeds=args.seeds, jobs=args.jobs,
                            work_dir=osp.join(args.work_dir, DATASETS[name]['folder']), config_dir=args.config_dir,
                            **teacher, **args.mim_options)


def run_study(name: str, roots: dict[str, tuple[str, str]], args: TransferStudySettings) -> dict:
    """The MIM study on dataset ``name`` (:func:`study_settings`), in this process; its report.json."""
    from .mim import run_study as run_mim_study
    settings = study_settings(name, roots, args)
    start = time.time()
    try:
        run_mim_study(settings)
    except Exception as error:
        raise RuntimeError(f'the study on {name} failed ({type(error).__name__}: {error}); its runs: '
                           f'{settings.work_dir}') from error
    print(f'[transfer_study] {name}: done in {(time.time() - start) / 60:.1f} min; {settings.work_dir}/report.md',
          flush=True)
    return read_json(osp.join(settings.work_dir, 'report.json'))


def options_text(options: dict) -> str:
    """``mim_options`` as the command-line options they stand for (``{'mim_iters': 2}``: ``--mim-iters 2``)."""
    def value(v):
        return ' '.join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return ' '.join(f'--{k.replace("_", "-")} {value(v)}' for k, v in options.items())


def verdict(diff: float, spread: float) -> str:
    """``gain`` / ``loss`` when ``|diff|`` is larger than ``spread`` (the sum of the two standard deviations)."""
    if abs(diff) <= spread:
        return 'within spread'
    return 'gain' if diff > 0 else 'loss'


def comparisons(report: dict) -> dict[tuple[str, str], dict]:
    """``{(arm, head): {diff, spread, verdict, arm, scratch}}``: each arm's mean mIoU minus scratch's, per decoder,
    from one study's report.json; plus ``(arm, 'probe')``: the frozen probe's mIoU minus random init's, ``learned``
    when it gains :data:`PROBE_MIN_GAIN` points (the study's warning margin; one pretraining run per arm)."""
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


def transfer_report(args: TransferStudySettings, reports: dict[str, dict], seconds: float) -> str:
    """The report of the whole command: settings, :func:`summary`, then each dataset's own report (its
    ``<work dir>/<folder>/report.md``, headings one level down)."""
    text = [f'# MIM study on {len(reports)} datasets: {", ".join(reports)}', '',
            f'Arms {args.arms}, decoders {args.heads}, seeds {args.seeds}; the same budgets on every dataset '
            f'({options_text(args.mim_options) or "mim_study.py defaults"}). Wall time {seconds / 60:.1f} min with '
            f'--jobs {args.jobs}. Each cell: arm - scratch in mIoU points, (the sum of the two standard deviations; '
            'arm vs scratch means); verdict gain/loss only when the difference is larger than that spread.', '',
            summary(reports)]
    for name in reports:
        own = read_bounded(osp.join(args.work_dir, DATASETS[name]['folder'], 'report.md'), 2**24, TextFileError,
                           'report').decode('utf-8')
        text += [f'## {name}', '', own.replace('\n# ', '\n### ').removeprefix('# ')]
    return '\n'.join(text)


def run_transfer_study(args: TransferStudySettings) -> str:
    """The whole command: check the work dir (a folder of studies it reuses: it may exist, never be a link or lie in
    the data), write (or reuse) every dataset, run every dataset's study, write ``<work dir>/report.md``; return its
    text. Raises ``OutputError`` and ``NotADemoRootError`` before any run."""
    from beit_mm.fileio.outputs import atomic_file, check_output
    start = time.time()
    data_roots = [osp.join(args.data_dir, DATASETS[n]['folder'] + suffix) for n in args.datasets
                  for suffix in ('', '_unlabeled')]
    check_output(args.work_dir, overwrite=True, kind='dir', inputs=data_roots)
    roots = {name: make_data(name, args) for name in args.datasets}
    reports = {name: run_study(name, roots, args) for name in args.datasets}
    text = transfer_report(args, reports, time.time() - start)
    with atomic_file(osp.join(args.work_dir, 'report.md')) as tmp, open(tmp, 'w') as f:
        f.write(text)
    return text
