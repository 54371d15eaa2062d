"""model-index.yml and configs/*/metafile.yml (OpenMMLab's model index format, as mmseg's and mmpretrain's).

Every full-size config is listed exactly once and every listed config exists; each entry carries a metric with its
source or ``Results: null`` with a ``Note``; the metafiles are the one source of the published numbers (READMEs,
docs/recipes.md and config headers state them); ``Converted From`` is a valid converter call writing the checkpoint
the config reads; the CvT FLOPs/params equal docs/cvt.md's table."""
import glob
import os
import os.path as osp
import re
import shlex

import pytest
import yaml
from mmengine.config import Config

from ..conftest import ROOT

TASKS = {'Semantic Segmentation': {'mIoU'}, 'Image Classification': {'Top 1 Accuracy'},
         'Panoptic Segmentation': {'PQ'}, 'Instance Segmentation': {'mask AP'}}  # mmdet's metafile names


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
    from beit_mm.apis.convert import MODELS as choices
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


# --- The metafiles are the one source of the published numbers: every "published" table cell of a README or of
# docs/recipes.md is a number of the config's metafile entry, and every Results metric of the entry is stated there.

NUMBER = re.compile(r'(?<![\w.])\d+\.\d+(?![\d.]*\w)|(?<![\w.])\d+(?=%)')  # 53.6, 0.95 (not v1.2.2, 0.x, 3e-5), 97%


def test_model_index_imports_every_metafile():
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imported = yaml.safe_load(f)['Import']
    found = sorted(osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '*', 'metafile.yml')))
    assert sorted(imported) == found, f'model-index.yml Import must list every configs/*/metafile.yml: {found}'


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _norm(number: str) -> float:
    return round(float(number), 6)


def entry_numbers(m: dict) -> set[float]:
    """The numbers a metafile entry publishes or cites: Results metrics, its Note and Paper title, and the metrics of
    its Downstream entries (a pretraining config's published number is its fine-tuned one)."""
    out = {_norm(n) for n in _numbers(str(m.get('Note', ''))) + _numbers(str((m.get('Paper') or {}).get('Title', '')))}
    for entry in [m] + [BY_NAME[d] for d in m.get('Downstream', []) if d in BY_NAME]:
        for result in entry['Results'] or []:
            out |= {_norm(v) for v in result['Metrics'].values() if isinstance(v, (int, float))}
    return out


def entry_metrics(m: dict) -> list[tuple[str, float]]:
    return [(key, value) for result in m['Results'] or [] for key, value in result['Metrics'].items()
            if isinstance(value, (int, float))]


def published_tables(path: str) -> list[tuple[int, list[str], list[str]]]:
    """``(line number, header cells, row cells)`` of every table row under a header with a column named
    ``published...``."""
    rows, header = [], None
    for number, line in enumerate(open(path).read().splitlines(), 1):
        if not line.startswith('|'):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if header is None:
            header = cells
        elif not set(line) <= set('|-: ') and any(h.lower().startswith('published') for h in header):
            rows.append((number, header, cells))
    return rows


def configs_named(cell: str) -> list[str]:
    """The metafile names of the configs a table cell names (``name.py`` or ``family/name.py``, with ``{a,b}`` and
    ``*`` expanded against the metafile entries)."""
    names = []
    for spec in re.findall(r'`(?:[\w-]+/)?([\w.{},*-]+?)\.py`', cell):
        alternatives = [spec]
        while any('{' in a for a in alternatives):
            expanded = []
            for a in alternatives:
                m = re.search(r'\{([^}]*)\}', a)
                expanded += [a[:m.start()] + part + a[m.end():] for part in m.group(1).split(',')] if m else [a]
            alternatives = expanded
        for a in alternatives:
            pattern = re.compile('^' + re.escape(a).replace(r'\*', '.*') + '$')
            names += [n for n in BY_NAME if pattern.match(n)]
    return names


def check_published_cell(where: str, names: list[str], cell: str) -> list[str]:
    """Problems of one "published" cell against the metafile entries ``names``."""
    problems = []
    allowed = set().union(*(entry_numbers(BY_NAME[n]) for n in names))
    for number in _numbers(cell):
        if _norm(number) not in allowed:
            files = sorted({osp.dirname(BY_NAME[n]['Config']) + '/metafile.yml' for n in names})
            problems.append(f'{where} states {number} for {", ".join(names)}, a number its metafile entry does not '
                            f'hold (numbers there: {sorted(allowed)}). The metafile ({", ".join(files)}) is the '
                            'source: correct the table, or the metafile with the published source')
    stated = {_norm(n) for n in _numbers(cell)}
    for n in names:
        if not BY_NAME[n]['Results'] and not BY_NAME[n].get('Downstream') and not cell.lower().startswith('none'):
            problems.append(f'{where}: {n} has no published number (its metafile entry: Results null, no Downstream); '
                            f'the cell must say so ("none ..."), not "{cell[:60]}"')
        for key, value in entry_metrics(BY_NAME[n]):
            if _norm(value) not in stated:
                problems.append(f'{where} does not state {n}\'s published {key} {value} (its metafile entry); '
                                'state it as the metafile has it')
    return problems


FAMILY_READMES = sorted(osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '*', 'README.md')))


@pytest.mark.parametrize('readme', FAMILY_READMES)
def test_family_readme_numbers_are_the_metafile_numbers(readme):
    """Each row of a family README's published table names a listed config and states exactly its metafile numbers."""
    problems = []
    for line, header, cells in published_tables(osp.join(ROOT, readme)):
        column = next(i for i, h in enumerate(header) if h.lower().startswith('published'))
        names = configs_named(cells[0])
        if not names:
            problems.append(f'{readme}:{line}: the row names no config of a metafile: {cells[0][:80]}')
            continue
        problems += check_published_cell(f'{readme}:{line}', names, cells[column])
    assert not problems, '\n'.join(problems)


def test_recipes_page_numbers_are_the_metafile_numbers():
    """docs/recipes.md's "published" column: the numbers of each row's configs' metafile entries, no other."""
    problems, rows = [], 0
    for line, header, cells in published_tables(osp.join(ROOT, 'docs', 'recipes.md')):
        column = next(i for i, h in enumerate(header) if h.lower().startswith('published'))
        names = configs_named(cells[0])
        assert names, f'docs/recipes.md:{line}: the row names no config of a metafile: {cells[0][:80]}'
        rows += 1
        problems += check_published_cell(f'docs/recipes.md:{line}', names, cells[column])
    assert rows >= len([m for m in MODELS if m['Results']]) // 2, 'docs/recipes.md lost its recipe tables'
    assert not problems, '\n'.join(problems)


def test_config_header_published_line_agrees_with_the_metafile():
    """A config header's ``Published...: <first word>`` is its metafile entry's first metric, or ``none`` / a downstream
    number when the entry has no Results."""
    problems = []
    for name, m in sorted(BY_NAME.items()):
        header = ''.join(line for line in open(osp.join(ROOT, m['Config'])) if line.startswith('#'))
        found = re.search(r'Published( downstream)?[^:\n]*:\s*(\d+\.\d+|\w+)', header)
        if found is None:
            continue
        first = found.group(2)
        if m['Results']:
            if not NUMBER.fullmatch(first) or _norm(first) != _norm(entry_metrics(m)[0][1]):
                problems.append(f'{m["Config"]} header says "Published: {first}", its metafile entry has '
                                f'{entry_metrics(m)[0]}')
        elif NUMBER.fullmatch(first) and _norm(first) not in entry_numbers(m):
            problems.append(f'{m["Config"]} header says "Published: {first}", its metafile entry has no Results and '
                            f'no such downstream number')
    assert not problems, '\n'.join(problems)
