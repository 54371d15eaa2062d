"""``tools/analysis/gpu_report.sh --dry-run`` (what CI can run without a GPU): the attention check runs on CPU at a
tiny size and passes, the GPU-only steps are listed as commands, and the benchmark runs on CPU for the tiny EoMT demo
with its batch, TFLOP/s and MFU columns."""
import os
import os.path as osp
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def test_gpu_report_dry_run(tmp_path):
    out_file = tmp_path / 'report.md'
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1')
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', 'analysis', 'gpu_report.sh'), '--dry-run', '--out',
                           str(out_file)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = out_file.read_text()
    assert report.startswith('# beit_mm GPU report') and report == proc.stdout
    check_rows = [ln for ln in report.splitlines() if ln.startswith(('| sdpa | 17 | 2 |', '| flex | 17 | 2 |'))]
    assert {ln.split('|')[1].strip() for ln in check_rows} == {'sdpa', 'flex'}, report
    assert all(ln.rstrip().endswith('| ok |') for ln in check_rows), report
    assert 'dry run, not run: BEIT_MM_TEST_DEVICE=cuda' in report
    assert report.count('tools/analysis/benchmark.py --device cuda') == 2 and '--amp' in report
    assert '--compile' in report  # eager and compiled rows on the GPU
    header = next(ln for ln in report.splitlines() if ln.startswith('| benchmark | model | mode | batch |'))
    assert '| TFLOP/s | MFU |' in header, header
    row = next(ln for ln in report.splitlines() if ln.startswith('| (h) ') and '| EoMT | eager | 1 |' in ln)
    cells = [c.strip() for c in row.strip('|').split('|')]
    assert float(cells[4]) > 0 and float(cells[8]) > 0 and float(cells[9]) > 0 and cells[10] == '-', row  # no CPU MFU


def test_gpu_report_steps_pick_a_subset(tmp_path):
    """``--steps bench --dtypes bf16`` (one piece of a report run in several commands) lists one benchmark command,
    with --amp, and nothing else."""
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1')
    script = osp.join(ROOT, 'tools', 'analysis', 'gpu_report.sh')
    proc = subprocess.run(['bash', script, '--dry-run', '--steps', 'bench', '--dtypes', 'bf16', '--parts', 'mim finetune',
                           '--no-compile'], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert '## 1.' not in proc.stdout and '## 2.' not in proc.stdout
    commands = [ln for ln in proc.stdout.splitlines() if 'tools/analysis/benchmark.py --device cuda' in ln]
    assert len(commands) == 1 and commands[0].endswith('--parts mim finetune --amp'), commands
