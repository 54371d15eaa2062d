"""One training step and one validation per model family (``beit_mm.benchmarks.family_steps``): the GPU session's
piece 4 in its dry run (every family's demo config on the CPU, a row each), the full-size configs as the GPU run
prepares them, and the isolation that lets the next family run after one crashes, hangs or outlasts the budget."""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys
import time

import pytest
from mmengine.config import Config

from beit_mm.benchmarks import family_steps
from beit_mm.benchmarks.family_steps import FAMILIES, Family, StepResult

from ..conftest import ROOT

# the families the GPU run must cover, as the issue lists them
EXPECTED = {'UPerNet', 'EoMT semantic', 'EoMT panoptic', 'EoMT instance', 'Mask2Former semantic',
            'Mask2Former panoptic', 'Mask2Former instance', 'ViT-Adapter UPerNet', 'ViT-Adapter Mask2Former',
            'MIM v1', 'MIM v2', 'ImageNet fine-tuning', 'CvT', 'DINOv3 EoMT'}
DATASET_LAYOUT = {'ADE20KDataset': 'ade20k', 'mmdet.CocoPanopticDataset': 'coco', 'mmdet.CocoDataset': 'coco',
                  'ImageNet': 'imagenet'}


def test_gpu_session_family_piece_dry_run(tmp_path):
    """``gpu_session.sh OUT --dry-run --piece 4``: a line and a table row per family, each ok with its step and
    validation seconds (none for MIM, whose configs validate nothing)."""
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1', TMPDIR=str(tmp_path))
    script = osp.join(ROOT, 'tools', 'analysis', 'gpu_session.sh')
    proc = subprocess.run(['bash', script, str(tmp_path / 'out'), '--dry-run', '--piece', '4'], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and 'failed' not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    printed = [ln for ln in proc.stdout.splitlines() if ': ok;' in ln or ': FAILED' in ln]
    assert [ln.split(':')[0] for ln in printed] == [f.name for f in FAMILIES], proc.stdout
    table = (tmp_path / 'out' / '6-families.md').read_text()
    rows = {cells[0]: cells for cells in ([c.strip() for c in ln.strip('|').split('|')] for ln in table.splitlines()
                                          if ln.startswith('| ') and not ln.startswith('| family'))}
    assert set(rows) == EXPECTED, table
    for name, (_, config, result, first, step, val, peak) in rows.items():
        family = next(f for f in FAMILIES if f.name == name)
        assert config == osp.basename(family.demo) and result == 'ok', rows[name]
        assert float(first) > 0 and float(step) > 0 and peak == '-', rows[name]
        assert (val == '-') == name.startswith('MIM'), rows[name]


@pytest.fixture(scope='module')
def full_size_data(tmp_path_factory):
    """``(layout, size) -> data root``: each family's synthetic set at its full size, written once."""
    base, roots = tmp_path_factory.mktemp('family_data'), {}

    def root(kind: str, size: int) -> str:
        if (kind, size) not in roots:
            roots[kind, size] = family_steps.make_data(kind, str(base / f'{kind}-{size}'), size)
        return roots[kind, size]
    return root


@pytest.mark.parametrize('family', FAMILIES, ids=lambda f: f.name)
def test_full_size_config_as_the_gpu_run_prepares_it(family, tmp_path, full_size_data):
    """The full-size config reads the synthetic data in its layout (every dataset and evaluator file under the new
    root: a train and a val sample through its pipelines, its evaluators built), trains 2 steps in bf16 eagerly and
    saves nothing, with no pretrained file named."""
    from mmengine.registry import DATASETS, METRICS, init_default_scope

    from beit_mm.apis.pretrained import pretrained_paths
    cfg = Config.fromfile(osp.join(ROOT, family.config))
    dataset_type = cfg.train_dataloader.dataset.type
    assert DATASET_LAYOUT.get(dataset_type, family.data) == family.data, family
    data_root = full_size_data(family.data, family.size)
    family_steps.prepare_config(cfg, data_root, str(tmp_path / 'work'), amp=True)
    assert pretrained_paths(cfg) == [] and not cfg.compile, family
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(key) is not None:
            assert cfg[key].dataset.data_root == data_root and cfg[key].batch_size <= 2, key
            inputs = DATASETS.build(cfg[key].dataset)[0]['inputs']
            image = inputs[0] if isinstance(inputs, list) else inputs  # MIM: the view and the tokenizer's view
            assert image.shape[0] == 3, (key, image.shape)
    evaluators = cfg.get('val_evaluator') or []
    for evaluator in evaluators if isinstance(evaluators, list) else [evaluators]:
        METRICS.build(evaluator)  # mmdet's CocoMetric reads its ann_file here
        assert str(evaluator.get('ann_file') or data_root).startswith(data_root), evaluator
    assert cfg.optim_wrapper.type == 'beit_mm.AmpOptimWrapper' and cfg.optim_wrapper.dtype == 'bfloat16'
    assert cfg.default_hooks.checkpoint.interval == -1 and not cfg.default_hooks.checkpoint.save_last
    steps = cfg.train_cfg.get('max_iters') or cfg.train_dataloader.dataset.indices // cfg.train_dataloader.batch_size
    assert steps == family_steps.TRAIN_STEPS, cfg.train_cfg
    assert family.size >= max(_crop_sizes(cfg)), (family.size, _crop_sizes(cfg))


def _crop_sizes(cfg) -> list[int]:
    """The crop or scale sizes the train pipeline asks for (0 when it names none)."""
    sizes = [0]
    for step in cfg.train_dataloader.dataset.get('pipeline') or []:
        for key in ('crop_size', 'size', 'scale'):
            value = step.get(key)
            if isinstance(value, int):
                sizes.append(value)
            elif key == 'crop_size' and isinstance(value, (tuple, list)):
                sizes.extend(value)
    return sizes


def _fake_run(family: Family, config: str, data_root: str, work_dir: str, amp: bool) -> StepResult:
    if family.name == 'hangs':
        time.sleep(60)
    if family.name == 'crashes':
        os._exit(3)
    if family.name == 'raises':
        raise RuntimeError('never caught: the child ends')
    return StepResult(family.name, config, first_step_s=0.5, step_s=0.25)


def test_a_crash_or_hang_fails_its_row_and_the_next_family_runs(monkeypatch, tmp_path):
    """A family whose process dies and one whose run raises fail their own rows with the reason and the next family
    runs; one that hangs is stopped when the budget is spent, and the family after it fails unrun."""
    monkeypatch.setattr(family_steps, 'run_family', _fake_run)
    monkeypatch.setattr(family_steps, 'make_data', lambda kind, root, size: root)
    monkeypatch.setattr(family_steps, 'MIN_SECONDS', 2)
    names = ('crashes', 'raises', 'runs', 'hangs', 'late')
    families = [Family(name, f'configs/{name}.py', 'ade20k', 64, f'configs/{name}.py', 'ade20k') for name in names]
    lines = []
    results = family_steps.run_families(families, ROOT, str(tmp_path), dry_run=True, amp=False, timeout=30,
                                        budget=8, report=lines.append)
    assert [r.family for r in results] == list(names)
    errors = [r.error for r in results]
    assert errors[0] == 'the process ended with exit code 3', errors
    assert errors[1] == 'the process ended with exit code 1', errors
    assert errors[2] == '' and results[2].step_s == 0.25, errors
    assert errors[3].startswith('timed out after ') and float(errors[3].split()[3]) <= 8, errors
    assert errors[4] == 'not run: the budget of 8 s was spent', errors
    assert lines[2] == 'runs: runs.py: ok; first step 0.50 s, step 0.25 s, val - s, peak -', lines
    table = family_steps.markdown(results, 'test device', amp=True)
    assert '| crashes | crashes.py | FAILED: the process ended with exit code 3 | - | - | - | - |' in table, table
    assert 'bf16 autocast' in table and 'on test device' in table
