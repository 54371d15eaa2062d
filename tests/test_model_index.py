"""model-index.yml and configs/*/metafile.yml (OpenMMLab's model index format, as mmseg's and mmpretrain's).

Checks: every full-size config (configs/<folder>/*.py without ``demo`` in its name) is listed exactly once and every
listed config exists; each entry carries a task/dataset/metric with its source, or ``Results: null`` with a ``Note``
(and MIM pretraining its listed ``Downstream`` fine-tuning entries); the published metric is the one the config's own
header comment states; the ``Converted From`` command is a valid ``tools/convert_checkpoint.py`` call whose output
file is the checkpoint the config reads (``pretrained`` / ``tokenizer_checkpoint``); and the CvT FLOPs/params in the
metafile equal docs/cvt.md's table.
"""
import glob
import os
import os.path as osp
import re
import shlex

import pytest
import yaml
from mmengine.config import Config

from .conftest import ROOT, load_tool

TASKS = {'Semantic Segmentation': {'mIoU'}, 'Image Classification': {'Top 1 Accuracy'}}


def load_index() -> tuple[dict, list[dict]]:
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        index = yaml.safe_load(f)
    collections, models = {}, []
    for path in index['Import']:
        with open(osp.join(ROOT, path)) as f:
            meta = yaml.safe_load(f)
        for c in meta['Collections']:
            collections[c['Name']] = c
        models += meta['Models']
    return collections, models


def full_size_configs() -> list[str]:
    # configs/demo/ (CPU examples on generated data) and configs/studies/ (the CPU-scale study protocol) are not
    # published recipes
    paths = glob.glob(osp.join(ROOT, 'configs', '*', '*.py'))
    return sorted(osp.relpath(p, ROOT) for p in paths if p.split(os.sep)[-2] not in ('_base_', 'demo', 'studies'))


def test_demo_configs_live_in_configs_demo():
    """A config on the generated demo sets (``*-demo`` dataset part) belongs in configs/demo/, not among a family's
    published recipes (where the index check above would ask for a metafile entry it cannot have)."""
    stray = sorted(p for p in full_size_configs() if 'demo' in osp.basename(p))
    assert stray == [], f'demo configs outside configs/demo/: {stray}; git mv them to configs/demo/ (the names stay)'


COLLECTIONS, MODELS = load_index()
BY_NAME = {m['Name']: m for m in MODELS}


def test_every_full_size_config_is_listed_and_every_listed_config_exists():
    listed = [m['Config'] for m in MODELS]
    assert len(listed) == len(set(listed)), 'a config is listed twice'
    assert sorted(listed) == full_size_configs()
    for m in MODELS:
        assert osp.isfile(osp.join(ROOT, m['Config'])), m['Config']
        assert m['Name'] == osp.splitext(osp.basename(m['Config']))[0]
        assert m['In Collection'] in COLLECTIONS
    for c in COLLECTIONS.values():
        assert c['Paper']['URL'].startswith('https://') and c['Code']['URL'].startswith('https://')


@pytest.mark.parametrize('name', sorted(BY_NAME))
def test_entry_has_task_metric_source_and_checkpoint(name):
    m = BY_NAME[name]
    assert m['Metadata']['Training Data']
    header = ''.join(line for line in open(osp.join(ROOT, m['Config'])) if line.startswith('#'))
    if m['Results'] is None:
        assert m.get('Note'), f'{name}: Results null needs a Note saying why'
        for downstream in m.get('Downstream', []):
            assert BY_NAME[downstream]['Results'], downstream
    else:
        assert m['Paper']['URL'].startswith('https://'), f'{name}: where was the metric published?'
        for result in m['Results']:
            assert result['Dataset'] in m['Metadata']['Training Data']
            metrics = result['Metrics']
            assert TASKS[result['Task']] <= set(metrics)
            for key in TASKS[result['Task']]:
                value = metrics[key]
                assert isinstance(value, float) and 0 < value < 100
                # the number the config's own header comment states as published
                assert re.search(rf'(?<![\d.]){re.escape(str(value))}(?![\d])', header), (name, key, value)

    conv = m['Converted From']
    assert conv['Weights'] and conv['Code'].startswith('https://')
    if conv['Command'] == 'none':
        return
    argv = shlex.split(conv['Command'])
    assert argv[:2] == ['python', 'tools/convert_checkpoint.py']
    choices = load_tool('tools/convert_checkpoint.py').MODELS
    model, source = argv[argv.index('--model') + 1], argv[argv.index('--source') + 1]
    assert source in choices[model], (model, source)
    dst = [a for a in argv[2:] if not a.startswith('--') and a not in (model, source)][-1]
    cfg = Config.fromfile(osp.join(ROOT, m['Config']))
    wanted = cfg.get('pretrained') or cfg.get('tokenizer_checkpoint')
    if wanted is not None:
        assert dst == wanted, f'{name}: the command writes {dst} but the config reads {wanted}'


def _readme_cvt_row(arch: str) -> list[str]:
    text = open(osp.join(ROOT, 'docs', 'cvt.md')).read()
    row = re.search(rf'^\| {re.escape(arch)} \|(.*)$', text, re.M)
    assert row, f'docs/cvt.md has no CvT table row for {arch}'
    return [c.strip() for c in row.group(1).split('|')]


@pytest.mark.parametrize('arch,name', [('CvT-13', 'cvt-13_8xb256-300e_in1k'), ('CvT-21', 'cvt-21_8xb128-300e_in1k')])
def test_cvt_flops_and_params_agree_with_readme(arch, name):
    params, _, gflops = _readme_cvt_row(arch)[:3]
    meta = BY_NAME[name]['Metadata']
    assert meta['Parameters'] == params
    assert meta['FLOPs'].startswith(f'{gflops}G')
