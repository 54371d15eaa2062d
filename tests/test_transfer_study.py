"""tools/analysis/transfer_study.py: the MIM study on the shapes and the digits in one command (tiny data, 2
iterations per stage), each with its own tables, the supervised VQ-KD teacher of each dataset trained on the other's
labels, and the cross-dataset verdicts (checked here against hand-made reports)."""
import json
import os
import subprocess
import sys

from .conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tools', 'analysis'))
import transfer_study  # noqa: E402


def fake_report(scratch, arm, probes=(20.0, 22.0)):
    run = lambda values: [dict(mIoU=v) for v in values]  # noqa: E731
    return dict(args=dict(heads=['upernet']), baseline=dict(mIoU=9.0), results={
        'scratch': dict(finetune=dict(upernet=run(scratch)), probe=[dict(probe_mIoU=probes[0])]),
        'vqkd-blockwise': dict(finetune=dict(upernet=run(arm)), probe=[dict(probe_mIoU=probes[1])])})


def test_verdicts_per_dataset():
    reports = {'shapes': fake_report([30, 31, 32], [35, 35.5, 36.5]),  # +4.33, spread 1.76: gain
               'digits': fake_report([28, 28.5, 29], [22, 23, 24], probes=(5.2, 6.0))}  # -5.5, spread 1.5: loss
    table = {name: transfer_study.comparisons(r) for name, r in reports.items()}
    assert table['shapes']['vqkd-blockwise', 'upernet']['verdict'] == 'gain'
    assert abs(table['digits']['vqkd-blockwise', 'upernet']['diff'] + 5.5) < 1e-9
    assert table['digits']['vqkd-blockwise', 'upernet']['verdict'] == 'loss'
    assert table['shapes']['vqkd-blockwise', 'probe']['verdict'] == 'learned'  # +2.0 >= 1 point
    assert table['digits']['vqkd-blockwise', 'probe']['verdict'] == 'nothing the probe sees'  # +0.8
    text = transfer_study.summary(reports)
    assert '- vqkd-blockwise vs scratch, upernet: gain on shapes; loss on digits (so it does not transfer' in text
    assert 'Majority-class mIoU (the trivial baseline of every fine-tuning row): shapes 9.00, digits 9.00.' in text
    assert transfer_study.verdict(1.0, 1.0) == 'within spread'


def test_two_datasets_in_one_command(tmp_path):
    work, data = tmp_path / 'work', tmp_path / 'data'
    cmd = [sys.executable, 'tools/analysis/transfer_study.py', '--data-dir', str(data), '--work-dir', str(work),
           '--num-train', '8', '--num-val', '4', '--num-unlabeled', '16', '--seeds', '0', '--heads', 'linear',
           '--mim-iters', '2', '--ft-iters', '2', '--vqkd-iters', '2', '--workers', '0']
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    text = (work / 'report.md').read_text()
    assert text.startswith('# MIM study on 2 datasets: shapes, digits')
    for arm in ('vqkd-blockwise', 'vqkd-supervised'):
        assert f'| {arm} | linear | ' in text and f'| {arm} | frozen probe vs random init | ' in text
        assert f'- {arm} vs scratch, linear: ' in text
    assert '## shapes' in text and '## digits' in text
    for name, other, classes in (('shapes', 'digits', 10), ('digits', 'shapes', 7)):
        report = json.loads((work / name / 'report.json').read_text())
        assert report['args']['labeled_root'] == str(data / name)
        # the supervised teacher learned the OTHER dataset's labels, and the VQ-KD read that teacher's weights
        assert report['args']['teacher_labeled_root'] == str(data / other)
        assert report['args']['teacher_num_classes'] == classes
        log = (work / name / 'vqkd_supervised' / 'train.log').read_text()
        assert f'backbone weights from {work / name / "teacher" / "iter_2.pth"} (0 missing' in log
        assert set(report['results']) == {'scratch', 'vqkd-blockwise', 'vqkd-supervised'}
    assert 'VQ-KD tokenizer of vqkd-supervised' in text
    assert 'dVAE' not in text  # no arm here trains one, so the report names none
    assert not list(work.rglob('*.part'))  # every report and metrics.json was renamed into place


def test_digits_dark_is_written_in_its_own_folder(tmp_path):
    """``--datasets digits-dark``: make_demo_data.py's dark-ink digits, in make_demo_data.py's default folder name."""
    from argparse import Namespace
    args = Namespace(data_dir=str(tmp_path), num_train=2, num_val=1, num_unlabeled=2)
    labeled, unlabeled = transfer_study.make_data('digits-dark', args)
    assert (labeled, unlabeled) == (str(tmp_path / 'digits_dark'), str(tmp_path / 'digits_dark_unlabeled'))
    for root, with_annotations in ((labeled, True), (unlabeled, False)):
        marker = json.loads((tmp_path / root / '.beit_mm_demo.json').read_text())['arguments']
        assert (marker['style'], marker['with_annotations']) == ('digits-dark', with_annotations)
    assert transfer_study.DATASETS['digits-dark']['num_classes'] == 10
