"""Every writer goes through one guarded writer: no output lands in a dataset root or on an input, goes through a link,
or replaces what the tool did not write; ``--overwrite`` removes only its manifest's files; ``tools/test.py`` refuses a
checkpoint that does not fit. Each refusal leaves every file, link and folder byte-identical and names the problem."""
from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
import re
import shutil
import sys

import pytest
import torch
from mmengine.config import Config
from PIL import Image

from beit_mm.apis import build_from_config
from beit_mm.apis.onnx_inference import infer_onnx
from beit_mm.apis.segment import infer_images
from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.fileio.outputs import OutputError

from ..conftest import ROOT, load_tool
from ..tools.test_tools import CONFIG

MANIFEST = '.beit_mm_output.json'  # an output folder's manifest (beit_mm.fileio.manifest.MANIFEST)


def tool(name: str):
    """The tool module ``tools/<name>.py`` (:func:`conftest.load_tool`)."""
    return load_tool(f'tools/{name}.py')


def run_tool(name: str, argv: list[str], monkeypatch) -> None:
    """``tools/<name>.py`` in-process with ``sys.argv`` = ``argv`` (as from the command line)."""
    monkeypatch.setattr(sys, 'argv', [f'{name}.py', *argv])
    tool(name).main()


def snapshot(root: str) -> dict:
    """``{relative path: sha256 | 'dir' | 'link -> target'}`` of everything under ``root`` (links not followed)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = osp.join(folder, name)
            rel = osp.relpath(path, root)
            if osp.islink(path):
                found[rel] = f'link -> {os.readlink(path)}'
            elif osp.isdir(path):
                found[rel] = 'dir'
            else:
                with open(path, 'rb') as f:
                    found[rel] = hashlib.sha256(f.read()).hexdigest()
    return found


def save_segmentor(cfg: Config, path: str, seed: int = 0, edit=None) -> str:
    torch.manual_seed(seed)
    state_dict = build_from_config(cfg).state_dict()
    if edit is not None:
        edit(state_dict)
    meta = dict(dataset_meta=dict(classes=[f'c{i}' for i in range(150)], palette=[[i, i, i] for i in range(150)]))
    torch.save({'state_dict': state_dict, 'meta': meta}, path)
    return path


@pytest.fixture(scope='module')
def world(tmp_path_factory) -> dict:
    """One folder holding a demo dataset, the tiny segmentor's config and checkpoint, input images, a file and a
    folder outside everything that links point to, a foreign file and a foreign folder."""
    root = str(tmp_path_factory.mktemp('world'))
    data = make_demo_ade20k(osp.join(root, 'data', 'ade'), num_train=1, num_val=2, size=48)
    cfg = Config.fromfile(CONFIG)
    config = osp.join(root, 'tiny.py')
    cfg.dump(config)
    os.makedirs(osp.join(root, 'ckpts'))
    ckpt = save_segmentor(cfg, osp.join(root, 'ckpts', 'ckpt.pth'))
    val = osp.join(data, 'images', 'validation')
    os.makedirs(osp.join(root, 'x', 'vis'))
    for name in sorted(os.listdir(val)):
        shutil.copy(osp.join(val, name), osp.join(root, 'x', 'vis', name))
    image = osp.join(root, 'x', 'vis', sorted(os.listdir(val))[0])
    os.makedirs(osp.join(root, 'outside_dir'))
    os.makedirs(osp.join(root, 'outside_empty'))
    os.makedirs(osp.join(root, 'foreign_dir'))
    for path, text in (('outside.txt', 'precious'), ('outside_dir/keep.txt', 'keep'),
                       ('foreign_dir/notes.txt', 'notes'), ('existing.png', 'not a png')):
        with open(osp.join(root, path), 'w') as f:
            f.write(text)
    os.symlink(osp.join(root, 'outside.txt'), osp.join(root, 'link_file.png'))
    os.symlink(osp.join(root, 'outside_dir'), osp.join(root, 'link_dir'))
    os.symlink(osp.join(root, 'outside_empty'), osp.join(root, 'link_empty'))
    from beit_mm.models.backbones.beit import BEiT
    torch.manual_seed(0)
    timm_src = osp.join(root, 'timm_beit.pth')
    torch.save({'model': BEiT(arch=dict(embed_dims=32, num_layers=1, num_heads=2, mlp_ratio=2.0),
                              img_size=32).state_dict()}, timm_src)
    pristine = str(tmp_path_factory.mktemp('pristine') / 'world')
    shutil.copytree(root, pristine, symlinks=True)  # the links keep their absolute targets inside the world
    return dict(root=root, data=data, config=config, ckpt=ckpt, image=image, inputs=osp.join(root, 'x', 'vis'),
                timm_src=timm_src, pristine=pristine, snapshot=snapshot(root))


@pytest.fixture(autouse=True)
def intact_world(request):
    """After each test, a world it changed (a writer that did not refuse) is restored, so one failure never spreads
    to the next test."""
    yield
    if 'world' not in request.fixturenames:
        return
    world = request.getfixturevalue('world')
    if snapshot(world['root']) != world['snapshot']:
        shutil.rmtree(world['root'])
        shutil.copytree(world['pristine'], world['root'], symlinks=True)


def data_options(world: dict, name: str) -> list[str]:
    return ['--cfg-options', *[f'{loader}.dataset.data_root={world["data"]}' for loader in
                               ('train_dataloader', 'val_dataloader', 'test_dataloader')],
            f'experiment_name={name}']


# A hazard: where the destination is (relative to the world) and what the refusal must say. Folder destinations:
FOLDER_HAZARDS = {
    'dataset': ('data/ade/annotations/validation', r'input folder|dataset root'),
    'input': ('ckpts', r'holds the input'),
    'symlink': ('link_dir', r'symbolic link'),
    'existing': ('foreign_dir', r'no beit_mm tool recorded writing'),
}
# File destinations:
FILE_HAZARDS = {
    'dataset': ('data/ade/images/validation/new.png', r'input folder|dataset root'),
    'input': ('ckpts/ckpt.pth', r'is the input'),
    'symlink': ('link_file.png', r'symbolic link'),
    'existing': ('existing.png', r'exists'),
}


def assert_refused(world: dict, name: str, argv: list[str], match: str, monkeypatch, capsys=None) -> str:
    """Run the tool, expect a non-zero exit naming the problem, and every byte of the world unchanged."""
    before = snapshot(world['root'])
    with pytest.raises(SystemExit) as exit_info:
        run_tool(name, argv, monkeypatch)
    args = exit_info.value.args
    message = args[0] if args and isinstance(args[0], str) else ''  # a refusal's line (also printed on stderr)
    if capsys is not None:
        err = capsys.readouterr().err
        message = err if message in err else message + err
    assert exit_info.value.code not in (0, None), message
    assert snapshot(world['root']) == before, f'{name} changed the world: {message}'
    assert re.search(match, message), message
    return message


def assert_one_error_line(message: str, prefix: str, match: str) -> None:
    """The refusal is one line starting with ``prefix`` that says ``match`` (libraries may log other lines)."""
    lines = [line for line in message.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and re.search(match, lines[0]), message


# ------------------------------------------------------------------------------------------------ tools/test.py
@pytest.mark.parametrize('option, hazard', [(option, hazard) for option in ('--out', '--show-dir', '--work-dir')
                                             for hazard in sorted(FOLDER_HAZARDS)
                                             if (option, hazard) != ('--work-dir', 'existing')])
def test_test_py_outputs(world, option, hazard, monkeypatch, capsys):
    """``tools/test.py --out`` inside a dataset root (e.g. its ground-truth folder) is refused; a work dir may hold
    anything."""
    dest, match = FOLDER_HAZARDS[hazard]
    if option == '--work-dir' and hazard == 'input':
        dest, match = 'ckpts/ckpt.pth', r'is the input'  # a work dir may hold the checkpoint it tests
    argv = [world['config'], world['ckpt'], '--work-dir', osp.join(world['root'], 'work_test')]
    argv += [option, osp.join(world['root'], dest), *data_options(world, f'refused_{hazard}_{option[2:]}')]
    message = assert_refused(world, 'test', argv, match, monkeypatch, capsys)
    assert_one_error_line(message, 'test.py: error: ', match)


@pytest.mark.parametrize('weights', ['other_model', 'nan', 'int8'])
@pytest.mark.parametrize('name', ['test', 'infer'])
def test_checkpoint_that_does_not_fit_is_refused(world, weights, name, monkeypatch, capsys):
    """Another model's checkpoint, NaN weights, int8 weights of the right shape: refused (exit != 0, one line), not
    scored as a random or broken model."""
    cfg = Config.fromfile(world['config'])
    key = 'backbone.blocks.0.attn.qkv.weight'
    if weights == 'other_model':
        cfg.model.backbone.arch = dict(embed_dims=64, num_layers=4, num_heads=2, mlp_ratio=2.0)
        cfg.model.neck.embed_dim = 64
        cfg.model.decode_head.in_channels = [64] * 4
        edit, match = None, r'shapes differ for .*backbone\.cls_token \(1, 1, 64\) vs \(1, 1, 32\)'
    elif weights == 'nan':
        edit, match = (lambda sd: sd[key].view(-1)[:3].fill_(float('nan'))), rf'NaN or inf: 1 \({key} \(3 of'
    else:
        def edit(sd):
            sd[key] = sd[key].round().to(torch.int8)
        match = rf'not floating point .*{key} \(int8\)'
    folder = osp.join(world['root'], 'bad_ckpts')
    os.makedirs(folder, exist_ok=True)
    path = save_segmentor(cfg, osp.join(folder, f'{weights}.pth'), edit=edit)
    if name == 'test':
        argv = [world['config'], path, '--work-dir', osp.join(world['root'], 'work_bad'),
                *data_options(world, f'bad_{weights}')]
    else:
        argv = [world['config'], path, world['image'], '--out-dir', osp.join(world['root'], 'infer_bad')]
    message = assert_refused(world, name, argv, match, monkeypatch, capsys)
    assert_one_error_line(message, f'{name}.py: error: ', match)
    assert not osp.exists(osp.join(world['root'], 'work_bad')) and not osp.exists(osp.join(world['root'], 'infer_bad'))


def test_test_py_overwrite_replaces_only_its_files(world, tmp_path, monkeypatch, capsys):
    """A second run needs ``--overwrite``; with a file the tool did not write in the folder it is refused even then;
    otherwise ``--overwrite`` replaces the files the first run listed, and nothing beside the folder changes."""
    out, show = str(tmp_path / 'out'), str(tmp_path / 'show')
    (tmp_path / 'sibling.txt').write_text('mine')
    argv = [world['config'], world['ckpt'], '--work-dir', str(tmp_path / 'work'), '--out', out, '--show-dir', show]
    run_tool('test', [*argv, *data_options(world, 'overwrite_1')], monkeypatch)
    preds = ['ADE_val_00000001.png', 'ADE_val_00000002.png']
    assert sorted(os.listdir(out)) == sorted([MANIFEST, *preds])
    assert len([f for _, _, fs in os.walk(show) for f in fs if f.endswith('.png')]) == 2
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.part')]
    first = snapshot(str(tmp_path))
    for extra in ([], ['--overwrite']):
        (tmp_path / 'out' / 'notes.txt').write_text('mine') if extra else None
        with pytest.raises(SystemExit) as exit_info:
            run_tool('test', [*argv, *extra, *data_options(world, f'overwrite_refused{len(extra)}')], monkeypatch)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert ('notes.txt (not written by tools/test.py)' if extra else 'pass --overwrite') in err, err
        if extra:
            os.remove(tmp_path / 'out' / 'notes.txt')
        assert snapshot(str(tmp_path)) == first
    run_tool('test', [*argv, '--overwrite', *data_options(world, 'overwrite_2')], monkeypatch)
    assert sorted(os.listdir(out)) == sorted([MANIFEST, *preds])
    assert (tmp_path / 'sibling.txt').read_text() == 'mine'
    listed = json.load(open(osp.join(out, MANIFEST)))['files']
    assert sorted(listed) == preds


# ------------------------------------------------------------------------------------------------ tools/infer.py
INFER_HAZARDS = {  # (output folder, inputs) relative to the world
    'dataset': ('data/ade/infer_out', ['data/ade/images/validation'], r'dataset root'),
    'input': ('x', ['x/vis'], r'holds the input'),  # --out-dir X with the input folder X/vis: its own inputs
    'symlink': ('link_dir', ['x/vis'], r'symbolic link'),
    'existing': ('foreign_dir', ['x/vis'], r'no beit_mm tool recorded writing'),
}


@pytest.mark.parametrize('hazard', sorted(INFER_HAZARDS))
def test_infer_outputs(world, hazard, monkeypatch):
    dest, inputs, match = INFER_HAZARDS[hazard]
    argv = [world['config'], world['ckpt'], *[osp.join(world['root'], i) for i in inputs], '--out-dir',
            osp.join(world['root'], dest)]
    assert_refused(world, 'infer', argv, match, monkeypatch)


def test_infer_names_both_inputs_of_one_label_map(world, tmp_path, monkeypatch):
    """``a.jpg`` and ``a.png`` would write one ``pred/a.png``: refused, naming both."""
    shutil.copy(world['image'], tmp_path / 'a.jpg')
    Image.open(world['image']).save(tmp_path / 'a.png')
    monkeypatch.setattr(sys, 'argv', ['infer.py', world['config'], world['ckpt'], str(tmp_path / 'a.jpg'),
                                      str(tmp_path / 'a.png'), '--out-dir', str(tmp_path / 'out')])
    with pytest.raises(SystemExit, match=r'inputs .*a\.jpg and .*a\.png would both write the label map pred/a\.png'):
        tool('infer').main()
    assert sorted(os.listdir(tmp_path)) == ['a.jpg', 'a.png']


def test_infer_overwrite_removes_only_what_it_wrote(world, tmp_path, monkeypatch):
    """``--overwrite`` with fewer images: the first run's files go, the new ones come, a file beside the folder stays; a
    file the tool did not write in the folder refuses the run."""
    images = [osp.join(world['inputs'], n) for n in sorted(os.listdir(world['inputs']))]
    out = tmp_path / 'out'
    (tmp_path / 'sibling.txt').write_text('mine')
    infer = infer_images
    infer(world['config'], world['ckpt'], images, str(out))
    assert sorted(os.listdir(out / 'pred')) == ['ADE_val_00000001.png', 'ADE_val_00000002.png']
    with pytest.raises(OutputError, match=r'holds 4 files that tools/infer.py wrote there.*--overwrite'):
        infer(world['config'], world['ckpt'], images[:1], str(out))
    (out / 'vis' / 'notes.txt').write_text('mine')
    before = snapshot(str(tmp_path))
    with pytest.raises(OutputError, match=r'vis/notes\.txt \(not written by tools/infer\.py\)'):
        infer(world['config'], world['ckpt'], images[:1], str(out), overwrite=True)
    assert snapshot(str(tmp_path)) == before
    os.remove(out / 'vis' / 'notes.txt')
    infer(world['config'], world['ckpt'], images[:1], str(out), overwrite=True)
    assert sorted(os.listdir(out / 'pred')) == ['ADE_val_00000001.png']
    assert sorted(os.listdir(out / 'vis')) == ['ADE_val_00000001.jpg']
    assert sorted(json.load(open(out / MANIFEST))['files']) == ['pred/ADE_val_00000001.png',
                                                                  'vis/ADE_val_00000001.jpg']
    assert (tmp_path / 'sibling.txt').read_text() == 'mine'


def test_onnx_shape_metadata_is_bounded(world, tmp_path):
    """An ONNX file's declared input shape is parsed bounded and checked before any array of that size exists."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node('Identity', ['input'], ['logits'])], 'g',
                              [helper.make_tensor_value_info('input', TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info('logits', TensorProto.FLOAT, [1, 3, 4, 4])])
    for shape in ('[1, 3, 100000000, 100000000]', '[1, 3, -4, 4]', '[1, 3, 4.0, 4]', '[1, 3, 4]', '"x"',
                  '[' * 100 + ']' * 100):
        model = helper.make_model(graph)
        for key, value in (('beit_mm.kind', 'segmentor'), ('beit_mm.shape', shape)):
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
        path = str(tmp_path / 'model.onnx')
        onnx.save(model, path)
        with pytest.raises(ValueError, match=r'model\.onnx (declares the input shape|metadata beit_mm.shape nests)'):
            infer_onnx(world['config'], path, [world['image']], str(tmp_path / 'out'))


# ------------------------------------------------------------------------------------------ the file writers
def file_writer_argv(world: dict, name: str, dest: str) -> list[str]:
    """The arguments of one run of a tool that writes one file to ``dest``."""
    w = world
    return {
        'visualize': ['attention', w['config'], w['ckpt'], w['image'], '--out', dest],
        'export': [w['config'], w['ckpt'], '--shape', '64', '64', '--out', dest, '--no-check'],
        'convert_checkpoint': ['--model', 'beit', '--source', 'timm', w['timm_src'], dest],
        'analysis/probe': [w['config'], w['ckpt'], '--labeled-root', w['data'], '--num-classes', '150',
                           '--img-size', '32', '--out', dest],
        'analysis/benchmark': ['--parts', 'no-such-part', '--out', dest],
        'analysis/benchmark_onnx': [w['config'], '--shape', '64', '64', '--rounds', '1', '--inputs', '1', '--out',
                                    dest],
    }[name]


#: The tools that had --overwrite at the base commit (the others replaced any file without asking).
HAD_OVERWRITE = ('export', 'convert_checkpoint', 'analysis/probe')
FILE_WRITERS = ('visualize', 'export', 'convert_checkpoint', 'analysis/probe', 'analysis/benchmark',
                'analysis/benchmark_onnx')


@pytest.mark.parametrize('hazard', sorted(FILE_HAZARDS))
@pytest.mark.parametrize('name', FILE_WRITERS)
def test_file_writers(world, name, hazard, monkeypatch):
    dest, match = FILE_HAZARDS[hazard]
    if hazard == 'input':  # the file the tool reads (benchmark.py reads none of the world: refused as existing)
        dest = {'convert_checkpoint': 'timm_beit.pth', 'analysis/benchmark': 'tiny.py',
                'analysis/benchmark_onnx': 'tiny.py'}.get(name, dest)
        match = r'exists' if name == 'analysis/benchmark' else match
    argv = file_writer_argv(world, name, osp.join(world['root'], dest))
    if name in HAD_OVERWRITE and hazard in ('input', 'symlink', 'dataset'):
        argv.append('--overwrite')  # refused even when the user allows replacing
    assert_refused(world, name, argv, match, monkeypatch)


# ------------------------------------------------------------------------------------ the folder writers
HF_HAZARDS = dict(FOLDER_HAZARDS, dataset=('data/ade/hf', r'dataset root'))


@pytest.mark.parametrize('hazard', sorted(HF_HAZARDS))
def test_convert_to_hf_folder(world, hazard, monkeypatch):
    """``--to hf --overwrite`` replaced any folder as a whole (a checkpoint folder, a folder of someone's files)."""
    dest, match = HF_HAZARDS[hazard]
    argv = ['--to', 'hf', world['ckpt'], osp.join(world['root'], dest), '--config', world['config'], '--part',
            'backbone', '--overwrite']
    assert_refused(world, 'convert_checkpoint', argv, match, monkeypatch)


def test_hf_folder_overwrite_needs_its_manifest(world, tmp_path):
    """An HF folder lists its files; ``--overwrite`` replaces it, but not once a file it did not write is inside."""
    convert = tool('convert_checkpoint')
    dst = tmp_path / 'hf'
    argv = ['--to', 'hf', world['ckpt'], str(dst), '--config', world['config'], '--part', 'backbone']
    convert.main(argv)
    assert {'config.json', 'model.safetensors'} <= set(json.load(open(dst / MANIFEST))['files'])
    convert.main([*argv, '--overwrite'])
    (dst / 'notes.txt').write_text('mine')
    before = snapshot(str(tmp_path))
    with pytest.raises(SystemExit, match=r'notes\.txt \(not written by'):
        convert.main([*argv, '--overwrite'])
    assert snapshot(str(tmp_path)) == before


@pytest.mark.parametrize('hazard', ['dataset', 'symlink'])
def test_make_demo_data_root(world, hazard, monkeypatch, capsys):
    """A demo root through a link (onto an empty folder elsewhere) or inside another dataset root: refused."""
    dest, match = {'dataset': ('data/ade/images/demo', r'inside the dataset root'),
                   'symlink': ('link_empty', r'symbolic link')}[hazard]
    argv = ['--root', osp.join(world['root'], dest), '--num-train', '1', '--num-val', '1', '--size', '32']
    message = assert_refused(world, 'make_demo_data', argv, match, monkeypatch, capsys)
    assert message.startswith('make_demo_data.py: error: ')


@pytest.mark.parametrize('hazard', ['dataset', 'symlink'])
@pytest.mark.parametrize('name', ['analysis/head_study', 'analysis/mim_study', 'analysis/transfer_study'])
def test_study_work_dirs(world, name, hazard, monkeypatch):
    """A study's work dir (runs it reuses) may exist, but never be a link or lie in the data."""
    dest, match = {'dataset': ('data/ade/study', r'input folder|dataset root'),
                   'symlink': ('link_dir', r'symbolic link')}[hazard]
    work = osp.join(world['root'], dest)
    argv = {
        'analysis/head_study': ['--data-root', world['data'], '--work-dir', work, '--seeds', '0', '--iters', '1',
                                '--heads', 'upernet'],
        'analysis/mim_study': ['--labeled-root', world['data'], '--unlabeled-root', osp.join(world['root'], 'none'),
                               '--num-classes', '150', '--work-dir', work],
        'analysis/transfer_study': ['--data-dir', osp.join(world['root'], 'transfer_data'), '--work-dir', work,
                                    '--num-train', '1', '--num-val', '1', '--num-unlabeled', '1', '--arms',
                                    'scratch', '--datasets', 'shapes'],
    }[name]
    if name == 'analysis/transfer_study':  # never run a study here, whatever happens before
        from beit_mm.studies import transfer
        for step in ('make_data', 'run_study'):  # what run_transfer_study does after its work-dir check
            monkeypatch.setattr(transfer, step, lambda *a: pytest.fail('the study ran'))
    assert_refused(world, name, argv, match, monkeypatch)


def test_gpu_report_out(world):
    """``gpu_report.sh --out`` (a shell script) goes through the same check before anything runs (one hazard: each
    run imports beit_mm in a new process)."""
    import subprocess
    dest, match = FILE_HAZARDS['symlink']
    before = snapshot(world['root'])
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=ROOT)
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', 'analysis', 'gpu_report.sh'), '--dry-run', '--out',
                           osp.join(world['root'], dest)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and re.search(match, proc.stderr), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert snapshot(world['root']) == before


# ---------------------------------------------------------------------------------------- the manifest itself
def test_a_manifest_cannot_point_removal_outside_its_folder(tmp_path):
    """Removal follows the folder's own entries: a manifest naming ``../sibling.txt`` (with its true sha256) removes
    nothing outside, and a listed file changed since it was written is refused."""
    from beit_mm.fileio.output_folder import OutputFolder
    out = str(tmp_path / 'out')
    folder = OutputFolder(out, 'tools/x.py')
    folder.begin(['a.txt'])
    with folder.file('a.txt') as tmp:
        open(tmp, 'w').write('a')
    folder.finish()
    (tmp_path / 'sibling.txt').write_text('mine')
    manifest = json.load(open(osp.join(out, MANIFEST)))
    manifest['files']['../sibling.txt'] = hashlib.sha256(b'mine').hexdigest()
    json.dump(manifest, open(osp.join(out, MANIFEST), 'w'))
    again = OutputFolder(out, 'tools/x.py', overwrite=True)
    again.begin([])
    again.finish()
    assert (tmp_path / 'sibling.txt').read_text() == 'mine' and os.listdir(out) == [MANIFEST]
    (tmp_path / 'out' / 'b.txt').write_text('b')
    manifest = json.load(open(osp.join(out, MANIFEST)))
    manifest['files']['b.txt'] = hashlib.sha256(b'other').hexdigest()
    json.dump(manifest, open(osp.join(out, MANIFEST), 'w'))
    with pytest.raises(OutputError, match=r'b\.txt \(changed since tools/x\.py wrote it\)'):
        OutputFolder(out, 'tools/x.py', overwrite=True)


# ------------------------------------------------------------------------- one rule set for every tool (issue 48)
def train_argv(world: dict, work_dir: str, data_root: str | None = None) -> list[str]:
    data_root = data_root or world['data']
    return [world['config'], '--work-dir', work_dir, '--cfg-options',
            *[f'{loader}.dataset.data_root={data_root}' for loader in
              ('train_dataloader', 'val_dataloader', 'test_dataloader')],
            'train_cfg.max_iters=1', 'train_cfg.val_interval=1', 'experiment_name=train_outputs']


def test_train_work_dir_inside_its_data_root_is_refused(world, tmp_path, monkeypatch, capsys):
    """``tools/train.py --work-dir`` inside the config's data root is refused, as tools/test.py refuses it: one check
    with the same inputs."""
    data = tmp_path / 'my_data'
    (data / 'photos').mkdir(parents=True)
    (data / 'photos' / 'a.jpg').write_bytes(b'not looked at')
    before = snapshot(str(data))
    monkeypatch.setattr(sys, 'argv', ['train.py', *train_argv(world, str(data / 'work'), str(data))])
    with pytest.raises(SystemExit) as stop:
        tool('train').main()
    message = capsys.readouterr().err
    assert stop.value.code == 2 and snapshot(str(data)) == before, message
    assert_one_error_line(message, 'train.py: error: ', r'lies inside the input folder .*my_data')


def test_train_config_dump_never_replaces_a_users_file(world, tmp_path, monkeypatch, capsys):
    """A user's file named like MMEngine's config dump in the work dir is refused unless the work dir's manifest lists
    it with its content, before anything is built."""
    work = tmp_path / 'work'
    work.mkdir()
    (work / 'tiny.py').write_text('# my notes, not a config dump\n')
    before = snapshot(str(work))
    monkeypatch.setattr(sys, 'argv', ['train.py', *train_argv(world, str(work))])
    with pytest.raises(SystemExit) as stop:
        tool('train').main()
    message = capsys.readouterr().err
    assert stop.value.code == 2 and snapshot(str(work)) == before, message
    assert_one_error_line(message, 'train.py: error: ', r'tiny.py is a file no beit_mm run recorded writing there')


def test_config_dump_is_replaced_only_when_listed_with_its_content(tmp_path):
    """The manifest side of the rule: a recorded dump may be replaced; edited afterwards, or a link, it may not."""
    from beit_mm.fileio.work_dir import check_config_dump, record_config_dump
    work, config = tmp_path / 'work', str(tmp_path / 'cfg.py')
    work.mkdir()
    (work / 'cfg.py').write_text('x = 1\n')
    record_config_dump(str(work), config)
    check_config_dump(str(work), config)
    (work / 'cfg.py').write_text('x = 2\n')
    with pytest.raises(OutputError, match='changed since a beit_mm run wrote it'):
        check_config_dump(str(work), config)
    os.remove(work / 'cfg.py')
    os.symlink(tmp_path / 'elsewhere.py', work / 'cfg.py')
    with pytest.raises(OutputError, match='is a link'):
        check_config_dump(str(work), config)


def test_export_metadata_is_bounded_by_what_the_checkpoint_holds(world, tmp_path, monkeypatch):
    """A ``dataset_meta`` listing one long class name 100000 times (small on disk) is refused by name, nothing
    written."""
    ckpt = torch.load(world['ckpt'], map_location='cpu', weights_only=False)
    ckpt['meta'] = dict(dataset_meta=dict(classes=['c' * 256] * 100000, palette=[[1, 2, 3]] * 100000))
    hostile = str(tmp_path / 'hostile.pth')
    torch.save(ckpt, hostile)
    assert osp.getsize(hostile) < 2 * osp.getsize(world['ckpt']) + 2**20
    out = str(tmp_path / 'model.onnx')
    monkeypatch.setattr(sys, 'argv', ['export.py', world['config'], hostile, '--out', out, '--shape', '32', '32',
                                      '--no-check'])
    with pytest.raises(SystemExit) as stop:
        tool('export').main()
    # refused at opening by the structure budget (2**22 + 256 per storage), or else by the export's own bound
    assert re.search(r'hostile.pth(: meta.dataset_meta classes are not a list of at most 65536 names| expands to '
                     r'more than \d+ entries)', str(stop.value)), stop.value
    assert not osp.lexists(out)
    from beit_mm.apis.export import ExportError, dataset_meta_json
    with pytest.raises(ExportError, match='more than the 1048576'):
        dataset_meta_json(dict(classes=['c' * 256] * 60000), 'x.pth')
    assert json.loads(dataset_meta_json(dict(classes=('a', 'b'), palette=[(0, 0, 0), [1, 2, 255]]), 'x.pth')) == \
        dict(classes=['a', 'b'], palette=[[0, 0, 0], [1, 2, 255]])


def test_planted_study_records_are_neither_reported_nor_used(tmp_path):
    """A study's run folder with a planted ``metrics.json`` and a URL ``checkpoint``: a record is used only when the
    study's own record vouches for it (settings and sha256 of the metrics and of the checkpoint inside the folder)."""
    from beit_mm.studies import runs
    settings = dict(unlabeled_root='/data', mim_iters=10, seed=0)
    calls = []
    work = tmp_path / 'run'
    work.mkdir()
    (work / 'metrics.json').write_text(json.dumps(dict(loss=0.01, checkpoint='https://example.com/w.pth',
                                                       settings=settings)))
    with pytest.raises(runs.UntrustedRecordError, match=r'cannot prove it wrote .*neither reported nor used'):
        runs.cached(str(work), lambda: calls.append(1) or {}, settings)
    # a planted record beside it, with the right sha256: the URL is still refused
    sha = hashlib.sha256((work / 'metrics.json').read_bytes()).hexdigest()
    (work / runs.RUN_RECORD).write_text(json.dumps(dict(settings=settings, files={'metrics.json': sha})))
    with pytest.raises(runs.UntrustedRecordError, match='names a URL'):
        runs.cached(str(work), lambda: calls.append(1) or {}, settings)
    # the study's own run: reused; its checkpoint replaced afterwards: refused
    own = tmp_path / 'own'
    own.mkdir()
    (own / 'iter_1.pth').write_bytes(b'weights')
    first = runs.cached(str(own), lambda: dict(loss=0.5, checkpoint=str(own / 'iter_1.pth')), settings)
    assert runs.cached(str(own), lambda: calls.append(1) or {}, settings) == first and calls == []
    (own / 'iter_1.pth').write_bytes(b'other weights')
    with pytest.raises(runs.UntrustedRecordError, match='is not the file the study recorded'):
        runs.cached(str(own), lambda: calls.append(1) or {}, settings)
    assert calls == []


def test_a_study_never_replaces_a_users_file_in_its_work_dirs(tmp_path, monkeypatch):
    """The studies' files in a work dir (``run.json``, ``train.log``, the reports) are written only over files the
    work dir's manifest lists with their content: a user's ``train.log`` stops the run before it starts."""
    from beit_mm.studies import runs
    work = tmp_path / 'run'
    work.mkdir()
    (work / 'train.log').write_text('my own log\n')
    (tmp_path / 'c.py').write_text('x = 1\n')
    monkeypatch.setattr(runs, 'start_training', lambda *a, **k: pytest.fail('the run started'))
    with pytest.raises(OutputError, match=r'train.log is not a file a beit_mm tool recorded writing there'):
        runs.train(str(tmp_path / 'c.py'), str(work), [])
    assert sorted(os.listdir(work)) == ['train.log'] and (work / 'train.log').read_text() == 'my own log\n'


def test_writing_next_to_fifos_and_sockets_opens_neither(tmp_path):
    """``atomic_file`` and ``atomic_dir`` fsync the folder they write into, not what else it holds: a FIFO, a socket and
    a link to a device there are left unopened (in a child process with a deadline)."""
    import socket
    import subprocess
    folder = tmp_path / 'out'
    (folder / 'deep').mkdir(parents=True)
    os.mkfifo(folder / 'deep' / 'fifo')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / 'listener'))
    os.symlink('/dev/zero', folder / 'zero')
    script = ('import sys\nfrom beit_mm.fileio.outputs import atomic_dir, atomic_file\n'
              'with atomic_file(sys.argv[1] + "/table.md") as tmp, open(tmp, "w") as f:\n    f.write("| a |\\n")\n'
              'with atomic_dir(sys.argv[1] + "/run") as tmp, open(tmp + "/x.txt", "w") as f:\n    f.write("x")\n')
    try:
        done = subprocess.run([sys.executable, '-c', script, str(folder)], cwd=ROOT, timeout=60, capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert (folder / 'table.md').read_text() == '| a |\n' and (folder / 'run' / 'x.txt').read_text() == 'x'
