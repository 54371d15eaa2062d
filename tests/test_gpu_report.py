"""``tools/analysis/gpu_report.sh --dry-run`` (what CI can run without a GPU): the attention check runs on CPU at a
tiny size and passes, and the GPU-only steps are listed as commands."""
import os
import os.path as osp
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def test_gpu_report_dry_run(tmp_path):
    out_file = tmp_path / 'report.md'
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1')
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', 'analysis', 'gpu_report.sh'), '--dry-run', '--out',
                           str(out_file)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = out_file.read_text()
    assert report.startswith('# beit_mm GPU report') and report == proc.stdout
    check_rows = [ln for ln in report.splitlines() if ln.startswith('| 17 | 2 |') and ln.count('|') == 8]
    assert check_rows and all(ln.rstrip().endswith('| ok |') for ln in check_rows), report
    assert 'dry run, not run: BEIT_MM_TEST_DEVICE=cuda' in report
    assert report.count('tools/analysis/benchmark.py --device cuda') == 2 and '--amp' in report
