"""Every command of README.md and of every docs page runs after the README's set-up, or is marked with what it needs
that this machine lacks (where it can run, its refusal is checked).

Pages: README.md, then ``docs/*.md`` and ``docs/studies/*.md`` in the order README.md links them; commands: the
non-blank, non-comment lines of ``bash``/``sh``/``shell``/``console`` blocks, continuations joined. The map
(``VARIABLES``, ``PLACEHOLDERS``, ``SHORTEN``, ``INPUTS``, ``SKIP``, ``MARKS``, ``RUNNABLE``) is listed in
docs/testing.md, checked against the tables here. Commands run in page order in a scratch copy of the checkout after
``bash tools/run_demo.sh``: ``python tools/<x>.py ...`` in this process, everything else in
``bash -lc 'source tools/activate.sh && <command>'``; identical commands run once."""
import contextlib
import glob
import os
import os.path as osp
import re
import shlex
import shutil
import subprocess
import sys
from typing import NamedTuple, Optional

import pytest
import torch

from ..conftest import ROOT, TORCH_THREADS, load_tool

TAGS = ('bash', 'sh', 'shell', 'console')
SETUP = 'bash tools/run_demo.sh'
TINY_DEMO_ARGS = ('--cfg-options train_cfg.max_iters=4 train_cfg.val_interval=4 default_hooks.checkpoint.interval=4 '
                  'default_hooks.logger.interval=2')
TIMEOUT = 900  # a hang guard (the set-up took 164-300+ s on a 2-core machine under load 12), not a time limit

# The map (docs/testing.md lists it; test_map_is_listed_in_the_docs checks the page against these tables).
PLACEHOLDERS = {
    # heads.md: "fine-tune the converted EoMT-L on your data": the EoMT-L config (ADE20K: real data, see MARKS)
    'YOUR_CONFIG': 'configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py',
    # heads.md: "--to hf" of your EoMT-L run (work_dirs/RUN/iter_39153.pth: 39k iterations on ADE20K, see MARKS)
    'CONFIG': 'configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py',
}
SHORTEN = {
    r'^(CONFIG=\S+ )?bash tools/run_demo\.sh\b': TINY_DEMO_ARGS,
    r'^bash tools/run_demo_cls\.sh\b': '--cfg-options train_cfg.max_epochs=1 train_cfg.val_interval=1',
    r'^python tools/train\.py ': '--cfg-options train_cfg.max_iters=4 train_cfg.val_interval=4 '
                                 'default_hooks.checkpoint.interval=4',
    r'^python tools/analysis/benchmark\.py --parts( [\w]+-demo)+ ': '--iters 1 --rounds 1 --warmup 0',
    r'^tensorboard --logdir ': '--port 0',  # a free port: the server is stopped once it says where it serves
    r'^python tools/analysis/tokenizer_precision\.py ': '--num-images 4',  # 32-64 images: 50-70 s each on 2 cores
    # batch 8 with bf16 emulated (AVX2-only CPUs): 164-207 s; batch 1: 27 s
    r'^python tools/analysis/benchmark_dalle\.py ': '--iters 1 --warmup 0 --batch 1',
    # a base model with UPerNet at 512 is ~1.8 TFLOPs to trace: 60-80 s per command on a loaded AVX2 core
    r'^python tools/analysis/get_flops\.py ': '--shape 128 128',
}
SKIP = {r'^bash tools/run_tests\.sh\b|^\w+=\S+ bash tools/run_tests\.sh\b':
        'the test suite itself: running it from a test would recurse'}


def _official_cvt13(path: str) -> None:
    """microsoft/CvT ``CvT-13-224x224-IN-1k.pth`` layout: flat state dict, official names, 1000-class head."""
    from beit_mm.models.backbones import CvT
    sd = CvT(arch='cvt-13', out_type='cls_token').state_dict()
    sd.update({'head.weight': torch.randn(1000, 384) * 0.02, 'head.bias': torch.zeros(1000)})
    torch.save(sd, path)


def _official_beit_ft(path: str) -> None:
    """unilm fine-tuned BEiT layout (``beit_*_pt22k_ft22k.pth``): weights under ``model``, a relative position bias
    table per block, ``fc_norm`` and ``head``; a 2-block, 64-wide BEiT (the command only reads the layout)."""
    from beit_mm.models.backbones import BEiT
    sd = BEiT(arch=dict(embed_dims=64, num_layers=2, num_heads=2, mlp_ratio=4.0)).state_dict()
    sd.update({'fc_norm.weight': torch.ones(64), 'fc_norm.bias': torch.zeros(64),
               'head.weight': torch.randn(10, 64) * 0.02, 'head.bias': torch.zeros(10)})
    torch.save({'model': sd}, path)


def _hf_eomt(path: str) -> None:
    """HF ``EomtForUniversalSegmentation`` ``model.safetensors`` (tue-mps/ade20k_semantic_eomt_large_512's layout),
    saved by transformers 4.57.6's own class (``tests/support/eomt_hf_reference.py``): a 4-layer, 64-wide model."""
    import tempfile
    from ..models.test_eomt_hf import reference
    with tempfile.TemporaryDirectory() as tmp:
        reference('make', tmp)
        shutil.copy(osp.join(tmp, 'hf', 'model.safetensors'), path)


def _timm_dinov2(path: str) -> None:
    """timm ``vit_large_patch14_reg4_dinov2.lvd142m`` ``model.safetensors`` layout (patch 14, 4 registers, layer
    scale, patch-only position embedding), saved by timm's own class: a 2-block, 64-wide model at 70 px."""
    from safetensors.torch import save_file
    from timm.models.vision_transformer import VisionTransformer
    model = VisionTransformer(img_size=70, patch_size=14, embed_dim=64, depth=2, num_heads=4, init_values=1e-5,
                              reg_tokens=4, no_embed_class=True, num_classes=0)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)


INPUTS = {
    'CvT-13-224x224-IN-1k.pth': _official_cvt13,
    'vit_large_patch14_reg4_dinov2.lvd142m.safetensors': _timm_dinov2,
    'model.safetensors': _hf_eomt,
    'beit_base_patch16_224_pt22k_ft22k.pth': _official_beit_ft,
}


class Mark(NamedTuple):
    needs: str  # 'a download', 'real data', 'hours'
    reason: str
    expect: tuple = ()  # run anyway: it must stop with a named error holding each of these


STUDY = 'hours on 2 cores: a study at its published size ({test} runs its short form)'
MARKS = {
    r'^pip |^([A-Z_]+=\S* )+pip wheel ': Mark(
        'a download',
        'installs packages from PyPI (tools/setup_env.sh builds the same environment; this test runs in it)'),
    r'^python tools/convert_checkpoint\.py .*--source hf pytorch_model\.bin ': Mark(
        'a download', "a Hugging Face model's file (no stand-in: two pages name different models' pytorch_model.bin)",
        ('pytorch_model.bin does not exist',)),
    r'^python tools/convert_checkpoint\.py .* beit_base_patch16_224_pt22k\.pth ': Mark(
        'a download', "unilm's self-supervised BEiT checkpoint", ('beit_base_patch16_224_pt22k.pth does not exist',)),
    r'^python tools/train\.py configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512\.py ': Mark(
        'real data', 'ADE20K at data/ade/ADEChallengeData2016 (and the published EoMT-L weights)',
        ('data/ade/ADEChallengeData2016/images/training does not exist', 'tools/make_demo_data.py')),
    r'^python tools/test\.py configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512\.py ': Mark(
        'real data', 'ADE20K at data/ade/ADEChallengeData2016 and the published EoMT-L weights (the 64-wide stand-in '
        'of model.safetensors is refused first: it does not fit the model)'),
    r'^python tools/convert_checkpoint\.py --to hf work_dirs/RUN/iter_39153\.pth ': Mark(
        'real data', "an EoMT-L run of the config's 39k iterations on ADE20K",
        ('work_dirs/RUN/iter_39153.pth does not exist',)),
    r'^python tools/analysis/mim_study\.py ': Mark('hours', STUDY.format(test='tests/studies/test_mim_study.py')),
    r'^python tools/analysis/transfer_study\.py ': Mark('hours', STUDY.format(test='tests/studies/test_transfer_study.py')),
    r'^python tools/analysis/head_study\.py ': Mark('hours', STUDY.format(test='tests/studies/test_head_study.py')),
    r'^python tools/test\.py \S+ work_dirs/head_demo/': Mark(
        'hours', "reads the head study's 1000-iteration runs (above it on its page)"),
    r'^python tools/analysis/benchmark\.py --parts (?!(\w+-demo ?)+ --)': Mark(
        'hours', 'minutes per part on 2 cores: full-size models timed (tests/benchmarks/test_benchmarks.py runs each part small)'),
    r'^python tools/analysis/benchmark_data\.py$': Mark(
        'hours', 'minutes on 2 cores: 592-px data sets written and timed (tests/benchmarks/test_benchmark_data.py runs it small)'),
}
IN_SHELL: tuple = ()  # tools with main() that must run in a login shell (none)
RUNNABLE = (r'^python3\.11 -m venv \.venv && \. \.venv/bin/activate$', r'^python tools/[\w/]+\.py( |$)',
            r'^(CONFIG=\S+ )?bash tools/run_demo(_cls)?\.sh( |$)',
            r'^source tools/activate\.sh$', r'^[A-Za-z_]\w*=\S+$', r'^tensorboard --logdir \S+ --port 0$')


LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')


def doc_pages() -> list[str]:
    """README.md, then every docs page in the order the pages link them (breadth-first from README.md)."""
    pages, i = ['README.md'], 0
    while i < len(pages):
        here = osp.dirname(pages[i])
        for target in LINK.findall(open(osp.join(ROOT, pages[i])).read()):
            path = osp.normpath(osp.join(here, target.split('#')[0]))
            if path.endswith('.md') and path.startswith('docs') and path not in pages \
                    and osp.isfile(osp.join(ROOT, path)):
                pages.append(path)
        i += 1
    return pages


def page_blocks(page: str, text: Optional[str] = None) -> list[list[tuple[int, str]]]:
    """The command blocks of a page, each a list of (line number, command): every non-blank, non-comment line, with
    backslash continuations joined and runs of blanks squeezed."""
    text = open(osp.join(ROOT, page)).read() if text is None else text
    blocks = []
    for m in re.finditer(r'^```([a-z]*)[^\n]*\n(.*?)^```', text, re.M | re.S):
        if m.group(1) not in TAGS:
            continue
        start, commands, current, first = text[:m.start(2)].count('\n') + 1, [], '', None
        for offset, line in enumerate(m.group(2).splitlines()):
            if not current and (not line.strip() or line.lstrip().startswith('#')):
                continue
            first = start + offset if not current else first
            if line.rstrip().endswith('\\'):
                current += line.rstrip()[:-1] + ' '
                continue
            commands.append((first, re.sub(r'\s+', ' ', current + line).strip()))
            current = ''
        if commands:
            blocks.append(commands)
    return blocks


def page_commands(page: str) -> list[tuple[int, str]]:
    """(line number, command) of every command of a page, in order."""
    return [command for block in page_blocks(page) for command in block]


class Plan(NamedTuple):
    page: str
    line: int
    shown: str  # as the page shows it (continuations joined)
    command: str  # what runs: variables and placeholders filled, shortened
    how: str  # 'run', 'skip', 'mark', or '' (neither: test_every_command_is_run_or_marked fails)
    reason: str = ''
    mark: Optional[Mark] = None


def fill(command: str, variables: dict) -> str:
    """``$NAME`` of the block's variables, then the placeholders (whole words) and the trailing comment dropped (of a
    command without shell syntax), then the shortening."""
    for name, value in variables.items():
        command = re.sub(r'\$\{?' + name + r'\b\}?', value, command)
    words = shlex.split(command, comments=True)
    if not re.search(r'[|&;<>`*?]', re.split(r'\s#', command, maxsplit=1)[0]):  # plain: words filled, comment dropped
        command = shlex.join(PLACEHOLDERS.get(w, w) for w in words)
    for pattern, extra in SHORTEN.items():
        if re.search(pattern, command):  # a plain command: drop a trailing comment, append the words
            command = f'{shlex.join(shlex.split(command, comments=True))} {extra}'
    return command


def plan_page(page: str, text: Optional[str] = None) -> list[Plan]:
    plans = []
    for block in page_blocks(page, text):
        variables: dict = {}
        for line, shown in block:
            command = fill(shown, variables)
            bare = ' '.join(shlex.split(command, comments=True))
            how, reason, mark = '', '', None
            if re.fullmatch(r'[A-Za-z_]\w*=\S+', bare):
                name, value = bare.split('=', 1)
                variables[name] = value
            if any(re.search(p, bare) for p in SKIP):
                how, reason = 'skip', next(r for p, r in SKIP.items() if re.search(p, bare))
            elif any(re.search(p, bare) for p in MARKS):
                mark = next(m for p, m in MARKS.items() if re.search(p, bare))
                how, reason = 'mark', f'needs {mark.needs}: {mark.reason}'
            elif any(re.search(p, bare) for p in RUNNABLE):
                how = 'run'
            plans.append(Plan(page, line, shown, command, how, reason, mark))
    return plans


PAGES = doc_pages()
PLANS = [plan for page in PAGES for plan in plan_page(page)]
COMMANDS = [(p.page, p.line, p.shown) for p in PLANS]


def _fresh_env() -> dict:
    """A login shell's environment: no virtualenv, no PYTHONPATH, PATH without this interpreter's venv."""
    venv = os.environ.get('VIRTUAL_ENV')
    path = [p for p in os.environ.get('PATH', '/usr/bin:/bin').split(os.pathsep)
            if not (venv and p.startswith(venv)) and '/.cache/beit_mm/' not in p]
    env = {k: os.environ[k] for k in ('HOME', 'USER', 'LANG', 'TERM', 'BEIT_MM_VENV', 'BEIT_MM_CACHE', 'TMPDIR')
           if k in os.environ}
    env.update(PATH=os.pathsep.join(path), OMP_NUM_THREADS=str(TORCH_THREADS))  # this worker's share of the cores
    return env


def _inputs(command: str, cwd: str) -> None:
    for token in shlex.split(command, comments=True):
        if token in INPUTS and not osp.exists(osp.join(cwd, token)):
            INPUTS[token](osp.join(cwd, token))


def _shell(command: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', '-lc', f'source tools/activate.sh && {command}'], cwd=cwd, env=_fresh_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)


def _in_process(words: list[str], cwd: str) -> tuple[int, str]:
    """``python tools/x.py args`` as ``load_tool('tools/x.py').main()`` with ``sys.argv`` set, in ``cwd``: (exit
    status, message of a non-zero SystemExit). Other exceptions propagate (the test shows their traceback)."""
    tool = load_tool(words[1])
    argv, here, threads = sys.argv, os.getcwd(), torch.get_num_threads()
    sys.argv = words[1:]
    os.chdir(cwd)
    try:
        tool.main()
        return 0, ''
    except SystemExit as stop:
        if stop.code in (None, 0):
            return 0, ''
        return (stop.code if isinstance(stop.code, int) else 1), str(stop)  # a refusal's text is its line
    finally:
        sys.argv = argv
        os.chdir(here)
        torch.set_num_threads(threads)


def _server(command: str, cwd: str, banner: str, wait: float = 120) -> str:
    """Start a server command, read its output until ``banner`` appears (or it exits, or ``wait`` s), stop it."""
    import selectors
    import time
    proc = subprocess.Popen(['bash', '-lc', f'source tools/activate.sh && exec {command}'], cwd=cwd,
                            env=_fresh_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, end = b'', time.monotonic() + wait
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:  # unbuffered reads: a buffered reader would hold the banner where select does not see it
        while banner.encode() not in out and time.monotonic() < end:
            if sel.select(timeout=1):
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out.decode(errors='replace')


def run_plan(plan: Plan, cwd: str) -> tuple[bool, str]:
    """Run one planned command in the copy: (passed, what to show if not)."""
    command = plan.command
    _inputs(command, cwd)
    words = shlex.split(command, comments=True)
    if plan.how == 'mark':  # run anyway: a named refusal holding every expected string, no traceback
        proc = _shell(command, cwd)
        out = proc.stdout + proc.stderr
        ok = proc.returncode != 0 and 'Traceback' not in out and all(s in out for s in plan.mark.expect)
        return ok, f'exit {proc.returncode}, expected {plan.mark.expect} without a traceback:\n{out[-5000:]}'
    if words[0] == 'tensorboard':
        out = _server(command, cwd, '(Press CTRL+C to quit)')
        return bool(re.search(r'TensorBoard \S+ at http://', out)), out[-3000:]
    if re.fullmatch(r'[A-Za-z_]\w*=\S+', ' '.join(words)):
        return True, ''  # a variable of its block (filled into the commands after it)
    if words[0] == 'python' and re.fullmatch(r'tools/[\w/]+\.py', words[1]) and words[1] not in IN_SHELL \
            and not re.search(r'[|&;<>$`*?]', command.split(' #')[0]):
        status, message = _in_process(words, cwd)
        return status == 0, f'exit {status}: {message}'
    proc = _shell(command, cwd)
    return proc.returncode == 0, f'exit {proc.returncode}:\n' + (proc.stdout + proc.stderr)[-5000:]


def _is_setup(command: str) -> bool:
    return shlex.split(command, comments=True) == shlex.split(SETUP)


def _checkout_copy(dst: str) -> str:
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        src = osp.join(ROOT, rel)
        if osp.isfile(src):
            os.makedirs(osp.dirname(osp.join(dst, rel)), exist_ok=True)
            shutil.copy2(src, osp.join(dst, rel))
    return dst


@pytest.fixture(scope='module')
def reader_checkout(tmp_path_factory):
    """A scratch copy of the checkout after the README's set-up command (tiny demo)."""
    copy = _checkout_copy(str(tmp_path_factory.mktemp('readme') / 'beit_mm'))
    assert any(_is_setup(c) for p, _, c in COMMANDS if p == 'README.md'), f'README lost its set-up command: {SETUP}'
    proc = _shell(fill(SETUP, {}), copy)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    # the reported mIoU is the LAST checkpoint's (iteration 4 of the tiny run), not one picked on the split it scores
    assert re.search(r'demo finished: mIoU: [\d.]+ \(checkpoint work_dirs/[\w.-]+/iter_4\.pth', proc.stdout), \
        proc.stdout[-3000:]
    # issue 27: the number comes with the CPU it came from (seeded runs repeat per CPU kind, not across kinds)
    assert re.search(r'\nCPU: .+, \d+ threads, (native bf16|no native bf16)', proc.stdout), proc.stdout[-3000:]
    return copy


def test_readme_has_commands_and_activation_step():
    assert len(COMMANDS) >= 5, COMMANDS
    text = open(osp.join(ROOT, 'README.md')).read()
    assert 'source tools/activate.sh' in text


def test_every_docs_page_is_linked():
    """Every ``docs/*.md`` and ``docs/studies/*.md`` page is reachable from README.md, so its commands are run here and
    readers find it."""
    on_disk = {osp.join(d, f) for d in ('docs', 'docs/studies') for f in os.listdir(osp.join(ROOT, d))
               if f.endswith('.md')}
    assert on_disk - set(PAGES) == set(), f'docs pages no page links: {sorted(on_disk - set(PAGES))}'


USAGE_SYNTAX = re.compile(r'\[--|\{[\w-]+(,[\w-]+)+\}|\[[A-Z_]+( \.\.\.)?\]')


def usage_lines(page: str) -> list[str]:
    """``page:line`` of every line inside a command block that holds usage syntax (``[--option]``, ``{a,b}``,
    ``[ARG]``), which a shell cannot run when pasted."""
    text = open(osp.join(ROOT, page)).read()
    found = []
    for m in re.finditer(r'^```([a-z]*)[^\n]*\n(.*?)^```', text, re.M | re.S):
        if m.group(1) not in TAGS:
            continue
        start = text[:m.start(2)].count('\n') + 1
        for offset, line in enumerate(m.group(2).splitlines()):
            if USAGE_SYNTAX.search(line.split(' #')[0]):
                found.append(f'{page}:{start + offset}')
    return found


def test_usage_lines_live_in_prose():
    """A runnable block holds commands that run as written; syntax summaries (``--source {timm,mmseg} SRC DST``,
    ``[--resume [CKPT] | --overwrite]``) go in the prose around it."""
    assert not [hit for page in PAGES for hit in usage_lines(page)]


def test_config_readmes_hold_no_commands():
    """configs/<family>/README.md are not among the pages whose commands run here, so they must hold none."""
    readmes = sorted(osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'configs', '*', 'README.md')))
    assert readmes, 'no configs/<family>/README.md found'
    assert {p: page_commands(p) for p in readmes if page_commands(p)} == {}


def broken_links(page: str, root: str = ROOT) -> list[str]:
    """Relative links of a page (``[text](path)`` or ``[text](path#anchor)``) whose file does not exist."""
    broken = []
    for target in LINK.findall(open(osp.join(root, page)).read()):
        if re.match(r'[a-z]+://|mailto:|#', target):
            continue
        if not osp.exists(osp.join(root, osp.dirname(page), target.split('#')[0])):
            broken.append(target)
    return broken


@pytest.mark.parametrize('page', PAGES)
def test_relative_links_resolve(page):
    assert broken_links(page) == [], f'{page}: links to files that do not exist'


def test_broken_link_is_caught(tmp_path):
    """The link check fails on a link to a missing page (the check itself can fail)."""
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'a.md').write_text('[ok](b.md) [gone](missing.md#x) [web](https://example.org)\n')
    (tmp_path / 'docs' / 'b.md').write_text('# b\n')
    assert broken_links('docs/a.md', root=str(tmp_path)) == ['missing.md#x']


_RESULTS: dict = {}


@pytest.mark.parametrize('plan', PLANS, ids=[f'{p.page}:L{p.line}' for p in PLANS])
def test_readme_command_runs(reader_checkout, plan):
    where = f'{plan.page} line {plan.line}: {plan.shown}'
    if plan.how == 'skip':
        pytest.skip(f'{where}: {plan.reason}')
    if _is_setup(plan.shown):
        return  # ran (shortened) in the fixture
    if plan.how == 'mark' and not plan.mark.expect:
        return  # not run: test_every_command_is_run_or_marked holds its reason
    assert plan.how, f'{where}: neither runnable, skipped nor marked'
    key = (plan.how, plan.command)
    if key not in _RESULTS:  # identical commands (after the map) run once
        _RESULTS[key] = (f'{plan.page} line {plan.line}',) + run_plan(plan, reader_checkout)
    first, passed, shown = _RESULTS[key]
    assert passed, f'{where}\n(as run: {plan.command}; first at {first})\n{shown}'


def count(plans: list[Plan]) -> dict:
    """Commands shown, run (unique after the map), run as a repeat, marked (refusal checked or not), skipped."""
    unique = {(p.how, p.command) for p in plans if p.how == 'run'}
    return {'shown': len(plans), 'run': sum(p.how == 'run' for p in plans), 'run unique': len(unique),
            'marked, refusal checked': sum(p.how == 'mark' and bool(p.mark.expect) for p in plans),
            'marked, not run': sum(p.how == 'mark' and not p.mark.expect for p in plans),
            'skipped': sum(p.how == 'skip' for p in plans), 'neither': sum(not p.how for p in plans)}


def test_every_command_is_run_or_marked():
    """Each command of each block is run, or marked (what it needs that this machine lacks), or skipped (the suite
    itself); a new kind of command added to a page fails here until RUNNABLE, MARKS or SKIP covers it."""
    print('docs commands:', count(PLANS))
    assert [f'{p.page}:{p.line}: {p.shown}' for p in PLANS if not p.how] == []


def test_a_new_command_is_caught():
    """The check itself can fail: an unknown command in a block is neither run nor marked; a usual one is run."""
    text = '# page\n\n```bash\nF=data/x\npython tools/make_demo_data.py --root $F   # c\nmim search beit\n```\n'
    plans = plan_page('docs/x.md', text)
    assert [(p.line, p.how) for p in plans] == [(4, 'run'), (5, 'run'), (6, '')]
    assert plans[1].command == 'python tools/make_demo_data.py --root data/x'


def map_not_listed(page: str = 'docs/testing.md') -> list[str]:
    """Entries of the map (placeholders, shortenings, stand-ins, kinds of marks) that the page's table does not show."""
    text = open(osp.join(ROOT, page)).read()
    section = text.split('## How the docs test runs the commands', 1)[-1].split('\n## ', 1)[0]
    rows = [line for line in section.splitlines() if line.startswith('| ')]
    wanted = [f'| placeholder | `{k}` | `{v}` |' for k, v in PLACEHOLDERS.items()]
    wanted += [f'`+ {extra}`' for extra in SHORTEN.values()] + [f'`{name}`' for name in INPUTS]
    wanted += [f'| needs {mark.needs} |' for mark in MARKS.values()]
    return sorted({w for w in wanted if not any(w in row for row in rows)})


def test_map_is_listed_in_the_docs():
    """docs/testing.md's table shows every placeholder with its value, every shortening, every stand-in and every
    kind of mark, so a reader can repeat what the test runs."""
    assert map_not_listed() == []
