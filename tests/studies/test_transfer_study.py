"""beit_mm.studies.transfer (tools/analysis/transfer_study.py's library) in-process: the cross-dataset verdicts
(checked against hand-made reports), each dataset's study command (its supervised VQ-KD teacher trained on the next
dataset's labels; tools/analysis/mim_study.py stood in for), the combined report, the datasets it writes; the CLI's
argument checks."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from beit_mm.studies import transfer
from beit_mm.studies.runs import study_env

from ..conftest import ROOT


def fake_report(scratch, arm, probes=(20.0, 22.0)):
    run = lambda values: [dict(mIoU=v) for v in values]  # noqa: E731
    return dict(args=dict(heads=['upernet']), baseline=dict(mIoU=9.0), results={
        'scratch': dict(finetune=dict(upernet=run(scratch)), probe=[dict(probe_mIoU=probes[0])]),
        'vqkd-blockwise': dict(finetune=dict(upernet=run(arm)), probe=[dict(probe_mIoU=probes[1])])})


def test_verdicts_per_dataset():
    reports = {'shapes': fake_report([30, 31, 32], [35, 35.5, 36.5]),  # +4.33, spread 1.76: gain
               'digits': fake_report([28, 28.5, 29], [22, 23, 24], probes=(5.2, 6.0))}  # -5.5, spread 1.5: loss
    table = {name: transfer.comparisons(r) for name, r in reports.items()}
    assert table['shapes']['vqkd-blockwise', 'upernet']['verdict'] == 'gain'
    assert abs(table['digits']['vqkd-blockwise', 'upernet']['diff'] + 5.5) < 1e-9
    assert table['digits']['vqkd-blockwise', 'upernet']['verdict'] == 'loss'
    assert table['shapes']['vqkd-blockwise', 'probe']['verdict'] == 'learned'  # +2.0 >= 1 point
    assert table['digits']['vqkd-blockwise', 'probe']['verdict'] == 'nothing the probe sees'  # +0.8
    text = transfer.summary(reports)
    assert '- vqkd-blockwise vs scratch, upernet: gain on shapes; loss on digits (so it does not transfer' in text
    assert 'Majority-class mIoU (the trivial baseline of every fine-tuning row): shapes 9.00, digits 9.00.' in text
    assert transfer.verdict(1.0, 1.0) == 'within spread'


def transfer_args(tmp_path, **changes) -> argparse.Namespace:
    args = dict(datasets=['shapes', 'digits'], arms=['scratch', 'vqkd-blockwise', 'vqkd-supervised'],
                heads=['linear'], seeds=[0], jobs=1, data_dir=str(tmp_path / 'data'), work_dir=str(tmp_path / 'work'),
                num_train=None, num_val=None, num_unlabeled=None)
    args.update(changes)
    return argparse.Namespace(**args)


def test_each_study_teaches_with_the_next_dataset(tmp_path, monkeypatch):
    """Each dataset's study is mim_study.py with the same arms, heads and seeds, the other options passed on, and the
    supervised teacher learning the next dataset's labels (shapes for the digits, digits for the shapes); a failed
    study stops the command with its log's tail and path."""
    calls = []

    def fake_study(cmd, cwd, stdout, stderr, env):
        calls.append(cmd)
        stdout.write('study log line\n')
        work = cmd[cmd.index('--work-dir') + 1]
        with open(os.path.join(work, 'report.json'), 'w') as f:
            json.dump(dict(labeled=cmd[cmd.index('--labeled-root') + 1]), f)
        assert env['PYTHONPATH'].split(os.pathsep)[0] == ROOT and cwd == ROOT
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(transfer.subprocess, 'run', fake_study)
    args = transfer_args(tmp_path)
    roots = {'shapes': ('/d/shapes', '/d/shapes_unlabeled'), 'digits': ('/d/digits', '/d/digits_unlabeled')}
    for name in args.datasets:
        os.makedirs(tmp_path / 'work' / name)
    reports = {name: transfer.run_study(name, roots, args, ['--mim-iters', '2']) for name in args.datasets}
    assert reports == {'shapes': dict(labeled='/d/shapes'), 'digits': dict(labeled='/d/digits')}
    shapes, digits = calls
    assert shapes[1] == os.path.join(ROOT, 'tools', 'analysis', 'mim_study.py') and shapes[-2:] == ['--mim-iters', '2']
    assert shapes[shapes.index('--num-classes') + 1] == '7' and digits[digits.index('--num-classes') + 1] == '10'
    assert shapes[shapes.index('--teacher-labeled-root') + 1:][:3] == ['/d/digits', '--teacher-num-classes', '10']
    assert digits[digits.index('--teacher-labeled-root') + 1:][:3] == ['/d/shapes', '--teacher-num-classes', '7']
    assert shapes[shapes.index('--arms') + 1:][:4] == ['scratch', 'vqkd-blockwise', 'vqkd-supervised', '--heads']
    assert (tmp_path / 'work' / 'shapes' / 'study.log').read_text() == 'study log line\n'
    monkeypatch.setattr(transfer.subprocess, 'run', lambda cmd, stdout, **kw: stdout.write('it broke\n') and
                        subprocess.CompletedProcess(cmd, 2))
    with pytest.raises(SystemExit, match=r'it broke\n\ntransfer_study: the study on digits failed \(exit 2\); full '
                       rf'log: {tmp_path}/work/digits/study.log'):
        transfer.run_study('digits', roots, transfer_args(tmp_path, arms=['scratch']), [])


def test_transfer_report(tmp_path):
    """The summary first, then each dataset's own report with its headings one level down."""
    args = transfer_args(tmp_path, arms=['scratch', 'vqkd-blockwise'], heads=['upernet'], seeds=[0, 1, 2])
    reports = {'shapes': fake_report([30, 31, 32], [35, 35.5, 36.5]),
               'digits': fake_report([28, 28.5, 29], [22, 23, 24])}
    for name in reports:
        os.makedirs(tmp_path / 'work' / name)
        (tmp_path / 'work' / name / 'report.md').write_text(f'# MIM study: {name}\n\ntext\n\n# not a title\n')
    text = transfer.transfer_report(args, reports, ['--mim-iters', '2'], 120.0)
    assert text.startswith('# MIM study on 2 datasets: shapes, digits\n\nArms [\'scratch\', \'vqkd-blockwise\'], '
                           "decoders ['upernet'], seeds [0, 1, 2]; the same budgets on every dataset (--mim-iters 2). "
                           'Wall time 2.0 min with --jobs 1.')
    assert text.index(transfer.summary(reports)) < text.index('## shapes\n\nMIM study: shapes\n\ntext\n\n### not a')
    assert text.endswith('## digits\n\nMIM study: digits\n\ntext\n\n### not a title\n')


def test_digits_dark_is_written_in_its_own_folder(tmp_path):
    """``--datasets digits-dark``: make_demo_data.py's dark-ink digits, in make_demo_data.py's default folder name."""
    args = argparse.Namespace(data_dir=str(tmp_path), num_train=2, num_val=1, num_unlabeled=2)
    labeled, unlabeled = transfer.make_data('digits-dark', args)
    assert (labeled, unlabeled) == (str(tmp_path / 'digits_dark'), str(tmp_path / 'digits_dark_unlabeled'))
    for root, with_annotations in ((labeled, True), (unlabeled, False)):
        marker = json.loads((tmp_path / root / '.beit_mm_demo.json').read_text())['arguments']
        assert (marker['style'], marker['with_annotations']) == ('digits-dark', with_annotations)
    assert transfer.DATASETS['digits-dark']['num_classes'] == 10


def test_cli_checks_its_arguments(tmp_path):
    proc = subprocess.run([sys.executable, 'tools/analysis/transfer_study.py', '--work-dir', str(tmp_path / 'w'),
                           '--data-dir', str(tmp_path / 'd'), '--arms', 'vqkd-blockwise'], cwd=ROOT,
                          capture_output=True, text=True, env=study_env(), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith('--arms needs scratch: every result is a difference to it'), proc.stderr
    assert not os.listdir(tmp_path)  # nothing written
