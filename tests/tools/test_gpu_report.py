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


def test_attention_check_goes_on_after_a_failing_kernel(monkeypatch, capsys):
    """``benchmark_attention.py --check`` with a kernel that raises: its rows carry the error, the kernels after it
    are still timed and checked, and the exit status is 1 at the end."""
    from beit_mm.models.layers import attention

    from ..conftest import load_tool

    def broken(*args, **kwargs):
        raise RuntimeError('injected kernel failure')

    monkeypatch.setattr(attention, 'flex_biased_attention', broken)
    tool = load_tool('tools/analysis/benchmark_attention.py')
    monkeypatch.setattr(sys, 'argv', ['benchmark_attention.py', '--device', 'cpu', '--check', '--tokens', '17',
                                      '--batch', '2', '--embed-dims', '32', '--heads', '2', '--iters', '1',
                                      '--rounds', '1', '--dtypes', 'fp32', '--impls', 'flex', 'sdpa'])
    try:
        tool.main()
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr().out
    assert code == 1, out
    timing = [ln for ln in out.splitlines() if ln.startswith('| 17 | 2 | float32 | inference |')]
    assert len(timing) == 1 and 'error: RuntimeError: injected kernel failure' in timing[0], out
    assert [c.strip() for c in timing[0].split('|')][-2] in ('sdpa', 'eager')  # the row finished
    check_rows = {ln.split('|')[1].strip(): ln for ln in out.splitlines() if ln.startswith(('| flex |', '| sdpa |'))}
    assert 'FAIL: error: RuntimeError: injected kernel failure' in check_rows['flex'], out
    assert check_rows['sdpa'].rstrip().endswith('| ok |'), out  # checked after the failing kernel


def test_gpu_session_dry_run(tmp_path):
    """``gpu_session.sh OUT --dry-run --piece 1``: pip commands listed, not run; the attention and fine-tuning reports
    land in OUT, the latter with each row's time by kernel category as 'ms (share)', shares adding up to about 100%."""
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1')
    script = osp.join(ROOT, 'tools', 'analysis', 'gpu_session.sh')
    proc = subprocess.run(['bash', script, str(tmp_path), '--dry-run', '--piece', '1'], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    setup = (tmp_path / '0-setup.txt').read_text()
    assert 'dry run, not run: ' in setup and '--no-index' in setup and 'mmcv==2.1.0' in setup, setup
    assert (tmp_path / '1-attention.md').read_text().startswith('# beit_mm GPU report')
    report = (tmp_path / '2-finetune.md').read_text()
    assert '--compile-peers' in report and '--profile 8' in report, report  # the GPU command, listed
    header = next(ln for ln in report.splitlines() if ln.startswith('| benchmark | model | mode | matmul |'))
    assert '| attention | elementwise | optimizer | other |' in header
    row = next(ln for ln in report.splitlines() if ln.startswith('| (h) ') and '| EoMT | eager | ' in ln
               and '%)' in ln)
    shares = [float(c.split('(')[1].rstrip('%) ')) for c in row.split('|')[4:9]]
    assert 97 <= sum(shares) <= 103 and shares[0] > 0, row


def test_gpu_session_data_piece_dry_run(tmp_path):
    """``gpu_session.sh OUT --dry-run --piece 3``: benchmark_data's worker and ``--device`` tables land in OUT, a row
    per pipeline of both recipes; the GPU run's recipe names each select one recipe."""
    import re

    from beit_mm.benchmarks.data_pipeline import RECIPES
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1', TMPDIR=str(tmp_path))
    script = osp.join(ROOT, 'tools', 'analysis', 'gpu_session.sh')
    proc = subprocess.run(['bash', script, str(tmp_path / 'out'), '--dry-run', '--piece', '3'], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and 'failed' not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = (tmp_path / 'out' / '5-data.md').read_text()
    rows = [[c.strip() for c in ln.split('|')[1:-1]] for ln in report.splitlines()
            if re.match(r'\| .+ \| (reference|new|gpu_decode) \|', ln)]
    recipes = ('BEiT v1 MIM 224 + 112', 'ImageNet fine-tuning 224')
    assert sorted(r[:2] for r in rows) == sorted([r, k] for r in recipes for k in ('gpu_decode', 'new', 'reference'))
    assert all(float(r[7]) > 0 for r in rows), rows  # the DataLoader's img/s through the preprocessor
    gpu_run = re.search(r'--recipes (.*?) --device cuda', open(script).read())[1]
    for prefix in re.findall(r'"([^"]+)"', gpu_run):
        assert sum(r.name.startswith(prefix) for r in RECIPES) == 1, prefix
