"""beit_mm.studies.transfer in-process: the cross-dataset verdicts against hand-made reports, each dataset's study
settings, the combined report and the datasets it writes; the CLI's argument checks and the options it passes on."""
import json
import os
import subprocess
import sys

import pytest

from beit_mm.studies import mim, transfer
from beit_mm.studies.settings import MimStudySettings, TransferStudySettings

from ..conftest import ROOT, load_tool

TOOL_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get('PYTHONPATH')))))


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


def transfer_args(tmp_path, **changes) -> TransferStudySettings:
    args = dict(datasets=['shapes', 'digits'], arms=['scratch', 'vqkd-blockwise', 'vqkd-supervised'],
                heads=['linear'], seeds=[0], jobs=1, data_dir=str(tmp_path / 'data'), work_dir=str(tmp_path / 'work'),
                num_train=None, num_val=None, num_unlabeled=None)
    args.update(changes)
    return TransferStudySettings(**args)


def test_each_study_teaches_with_the_next_dataset(tmp_path, monkeypatch):
    """Each dataset's study is the MIM study with the same options and a teacher learning the next dataset's labels; a
    failed study stops the command naming the dataset, the error and its runs."""
    calls = []

    def fake_study(settings):
        calls.append(settings)
        with open(os.path.join(settings.work_dir, 'report.json'), 'w') as f:
            json.dump(dict(labeled=settings.labeled_root), f)
        return 'report'

    monkeypatch.setattr(mim, 'run_study', fake_study)
    args = transfer_args(tmp_path, mim_options=dict(mim_iters=2))
    roots = {'shapes': ('/d/shapes', '/d/shapes_unlabeled'), 'digits': ('/d/digits', '/d/digits_unlabeled')}
    for name in args.datasets:
        os.makedirs(tmp_path / 'work' / name)
    reports = {name: transfer.run_study(name, roots, args) for name in args.datasets}
    assert reports == {'shapes': dict(labeled='/d/shapes'), 'digits': dict(labeled='/d/digits')}
    shapes, digits = calls
    assert isinstance(shapes, MimStudySettings) and shapes.mim_iters == 2 and digits.mim_iters == 2
    assert (shapes.num_classes, digits.num_classes) == (7, 10)
    assert (shapes.teacher_labeled_root, shapes.teacher_num_classes) == ('/d/digits', 10)
    assert (digits.teacher_labeled_root, digits.teacher_num_classes) == ('/d/shapes', 7)
    assert shapes.arms == ['scratch', 'vqkd-blockwise', 'vqkd-supervised'] and shapes.heads == ['linear']
    assert shapes.work_dir == str(tmp_path / 'work' / 'shapes') and shapes.unlabeled_root == '/d/shapes_unlabeled'

    def broken(settings):
        raise RuntimeError('it broke')

    monkeypatch.setattr(mim, 'run_study', broken)
    with pytest.raises(RuntimeError, match=r'the study on digits failed \(RuntimeError: it broke\); its runs: '
                       rf'{tmp_path}/work/digits'):
        transfer.run_study('digits', roots, transfer_args(tmp_path, arms=['scratch']))


def test_cli_passes_the_other_options_on():
    """Options of the MIM study given to the transfer tool reach every dataset's study as settings; its own options
    and the data roots it sets are not among them."""
    tool = load_tool('tools/analysis/transfer_study.py')
    settings = tool.parse_args(['--arms', 'scratch', '--mim-iters', '2', '--ft-options', 'a=1', 'b=2',
                                '--workers', '0'])
    assert settings.mim_options == dict(mim_iters=2, ft_options=['a=1', 'b=2'], workers=0)
    assert transfer.options_text(settings.mim_options) == '--mim-iters 2 --ft-options a=1 b=2 --workers 0'
    with pytest.raises(SystemExit):
        tool.parse_args(['--labeled-root', 'x'])  # the transfer study sets the roots itself


def test_transfer_report(tmp_path):
    """The summary first, then each dataset's own report with its headings one level down."""
    args = transfer_args(tmp_path, arms=['scratch', 'vqkd-blockwise'], heads=['upernet'], seeds=[0, 1, 2])
    reports = {'shapes': fake_report([30, 31, 32], [35, 35.5, 36.5]),
               'digits': fake_report([28, 28.5, 29], [22, 23, 24])}
    for name in reports:
        os.makedirs(tmp_path / 'work' / name)
        (tmp_path / 'work' / name / 'report.md').write_text(f'# MIM study: {name}\n\ntext\n\n# not a title\n')
    text = transfer.transfer_report(TransferStudySettings(**{**vars(args), 'mim_options': dict(mim_iters=2)}),
                                    reports, 120.0)
    assert text.startswith('# MIM study on 2 datasets: shapes, digits\n\nArms [\'scratch\', \'vqkd-blockwise\'], '
                           "decoders ['upernet'], seeds [0, 1, 2]; the same budgets on every dataset (--mim-iters 2). "
                           'Wall time 2.0 min with --jobs 1.')
    assert text.index(transfer.summary(reports)) < text.index('## shapes\n\nMIM study: shapes\n\ntext\n\n### not a')
    assert text.endswith('## digits\n\nMIM study: digits\n\ntext\n\n### not a title\n')


def test_digits_dark_is_written_in_its_own_folder(tmp_path):
    """``--datasets digits-dark``: make_demo_data.py's dark-ink digits, in make_demo_data.py's default folder name."""
    args = TransferStudySettings(data_dir=str(tmp_path), num_train=2, num_val=1, num_unlabeled=2)
    labeled, unlabeled = transfer.make_data('digits-dark', args)
    assert (labeled, unlabeled) == (str(tmp_path / 'digits_dark'), str(tmp_path / 'digits_dark_unlabeled'))
    for root, with_annotations in ((labeled, True), (unlabeled, False)):
        marker = json.loads((tmp_path / root / '.beit_mm_demo.json').read_text())['arguments']
        assert (marker['style'], marker['with_annotations']) == ('digits-dark', with_annotations)
    assert transfer.DATASETS['digits-dark']['num_classes'] == 10


def test_cli_checks_its_arguments(tmp_path):
    proc = subprocess.run([sys.executable, 'tools/analysis/transfer_study.py', '--work-dir', str(tmp_path / 'w'),
                           '--data-dir', str(tmp_path / 'd'), '--arms', 'vqkd-blockwise'], cwd=ROOT,
                          capture_output=True, text=True, env=TOOL_ENV, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith('--arms needs scratch: every result is a difference to it'), proc.stderr
    assert not os.listdir(tmp_path)  # nothing written
