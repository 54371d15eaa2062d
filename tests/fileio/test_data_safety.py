"""No tool destroys data it did not write: the demo generators refuse a real ADE20K or ImageNet root before writing,
``AtomicCheckpointHook`` deletes only its own unfinished writes, and ``tools/train.py`` refuses a work dir holding
another run's checkpoints without ``--resume``/``--overwrite``."""
import hashlib
import json
import os
import os.path as osp
import stat
import subprocess
import sys
import types

import numpy as np
import pytest
from mmengine.logging import MessageHub, MMLogger
from PIL import Image

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.data.demo.custom import make_demo_custom
from beit_mm.data.demo.imagenet import make_demo_imagenet
from beit_mm.engine.hooks.atomic_checkpoint import AtomicCheckpointHook
from beit_mm.fileio.outputs import PARTIAL_SUFFIX

from ..conftest import ROOT, load_tool, run_tool

MAKE_DEMO_DATA = osp.join(ROOT, 'tools', 'make_demo_data.py')
TRAIN = osp.join(ROOT, 'tools', 'train.py')
TINY_CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
MARKER = '.beit_mm_demo.json'


# ----------------------------------------------------------------------------------------------- fake real roots
def _write_image(path: str, size: int = 16, mask: bool = False, seed: int = 0) -> None:
    """A small valid JPEG (RGB) or PNG label map (uint8, ADE20K raw values 0..150) at ``path``."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    if mask:
        Image.fromarray(rng.integers(0, 151, (size, size), dtype=np.uint8), mode='L').save(path)
    else:
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path, quality=90)


def _write_text(path: str, text: str) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def make_real_ade20k(root: str) -> str:
    """ADEChallengeData2016's layout with real file names: 3 training and 2 validation pairs (counts no demo call
    below asks for, and one that a demo call does ask for) plus the two text files of the release."""
    for split, prefix, count in (('training', 'train', 3), ('validation', 'val', 2)):
        for i in range(1, count + 1):
            stem = f'ADE_{prefix}_{i:08d}'
            _write_image(osp.join(root, 'images', split, stem + '.jpg'), seed=i)
            _write_image(osp.join(root, 'annotations', split, stem + '.png'), mask=True, seed=i)
    _write_text(osp.join(root, 'objectInfo150.txt'), 'Idx\tRatio\tTrain\tVal\tName\n1\t0.1576\t11664\t1172\twall\n')
    _write_text(osp.join(root, 'sceneCategories.txt'), 'ADE_train_00000001 airport_terminal\n')
    return root


def make_real_imagenet(root: str) -> str:
    """ImageNet's layout after ``valprep`` with real file names: two wnid folders per split and meta/*.txt."""
    for wnid, files in (('n01440764', ('n01440764_10026', 'n01440764_10027')), ('n01443537', ('n01443537_10007', ))):
        for i, stem in enumerate(files):
            _write_image(osp.join(root, 'train', wnid, stem + '.JPEG'), seed=i)
    for wnid, stem in (('n01440764', 'ILSVRC2012_val_00000293'), ('n01443537', 'ILSVRC2012_val_00000236')):
        _write_image(osp.join(root, 'val', wnid, stem + '.JPEG'), seed=7)
    _write_text(osp.join(root, 'meta', 'train.txt'),
                'n01440764/n01440764_10026.JPEG 0\nn01440764/n01440764_10027.JPEG 0\n'
                'n01443537/n01443537_10007.JPEG 1\n')
    _write_text(osp.join(root, 'meta', 'val.txt'), 'ILSVRC2012_val_00000293.JPEG 0\nILSVRC2012_val_00000236.JPEG 1\n')
    _write_text(osp.join(root, 'LOC_synset_mapping.txt'), 'n01440764 tench, Tinca tinca\nn01443537 goldfish\n')
    return root


def snapshot(root: str) -> dict:
    """``{relative path: (sha256 or 'dir' or 'link', mtime_ns)}`` of ``root`` and everything under it."""
    def entry(path: str) -> tuple:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            return 'dir', st.st_mtime_ns
        if stat.S_ISLNK(st.st_mode):
            return 'link', st.st_mtime_ns
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest(), st.st_mtime_ns

    found = {'.': entry(root)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = osp.join(folder, name)
            found[osp.relpath(path, root)] = entry(path)
    return found


def contents(root: str) -> dict:
    """``{relative path: sha256}`` of the files under ``root`` (no mtimes: two roots written alike compare equal)."""
    return {p: v[0] for p, v in snapshot(root).items() if v[0] != 'dir'}


def changes(before: dict, after: dict) -> list:
    """The paths added, removed or changed (content or mtime) between two snapshots."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


@pytest.fixture
def real_roots(tmp_path) -> dict:
    return {'ade20k': make_real_ade20k(str(tmp_path / 'ADEChallengeData2016')),
            'imagenet': make_real_imagenet(str(tmp_path / 'imagenet'))}


# ------------------------------------------------------------------------------------- demo data: refusals
CLI_CALLS = {
    'ade20k': ['--dataset', 'ade20k', '--num-train', '2', '--num-val', '1', '--size', '32'],
    'shapes': ['--dataset', 'shapes', '--num-train', '2', '--num-val', '1', '--size', '32'],
    'imagenet': ['--dataset', 'imagenet', '--num-classes', '2', '--num-train', '1', '--num-val', '1', '--size', '16'],
    'custom': ['--layout', 'custom', '--num-train', '2', '--num-val', '1', '--size', '32'],
}
PYTHON_CALLS = {
    'ade20k-other-counts': lambda root: make_demo_ade20k(root, 2, 1, 32),
    'ade20k-same-counts': lambda root: make_demo_ade20k(root, 3, 2, 32),  # the fake ADE20K's own counts
    'shapes-unlabeled': lambda root: make_demo_ade20k(root, 2, 0, 32, style='shapes', with_annotations=False),
    'imagenet': lambda root: make_demo_imagenet(root, 2, 1, 1, 16),
    'imagenet-ann-files': lambda root: make_demo_imagenet(root, 2, 1, 1, 16, ann_files=True),
    'custom': lambda root: make_demo_custom(root, 2, 1, 32),
}


def _check_refusal(dataset: str, kind: str, root: str, before: dict, code, stderr: str) -> None:
    assert changes(before, snapshot(root)) == [], f'{dataset} on the {kind} root changed files'
    assert code == 2, f'{dataset} on the {kind} root exited {code}:\n{stderr[-2000:]}'
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in stderr, stderr
    assert root in lines[0] and 'refus' in lines[0], lines[0]
    assert MARKER in lines[0] and 'new or empty folder' in lines[0], lines[0]


@pytest.mark.parametrize('dataset', sorted(CLI_CALLS))
def test_make_demo_data_refuses_a_real_dataset_root(real_roots, dataset, monkeypatch, capsys):
    """Each ``--dataset`` of tools/make_demo_data.py against a real-looking ADE20K and ImageNet root: exit 2, one line
    naming the root, no traceback, not one byte, path or mtime changed."""
    tool = load_tool('tools/make_demo_data.py')
    for kind, root in real_roots.items():
        before = snapshot(root)
        monkeypatch.setattr(sys, 'argv', ['make_demo_data.py', *CLI_CALLS[dataset], '--root', root])
        with pytest.raises(SystemExit) as exit_:
            tool.main()
        _check_refusal(dataset, kind, root, before, exit_.value.code, capsys.readouterr().err)


def test_make_demo_data_refusal_as_a_command(real_roots):
    """The same refusal from the shell (a process of its own): exit status 2 and one line on stderr."""
    root = real_roots['imagenet']
    before = snapshot(root)
    proc = subprocess.run([sys.executable, MAKE_DEMO_DATA, *CLI_CALLS['ade20k'], '--root', root], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    _check_refusal('ade20k', 'imagenet', root, before, proc.returncode, proc.stderr)


@pytest.mark.parametrize('call', sorted(PYTHON_CALLS))
def test_demo_generators_refuse_a_real_dataset_root(real_roots, call):
    """The python generators raise NotADemoRootError before writing; the message names the root, files found there
    (at most 3) and the fix."""
    for kind, root in real_roots.items():
        before = snapshot(root)
        error = None
        try:
            PYTHON_CALLS[call](root)
        except Exception as e:  # checked below, after the files
            error = e
        assert changes(before, snapshot(root)) == [], f'{call} on the {kind} root changed files'
        assert type(error).__name__ == 'NotADemoRootError', f'{call} on the {kind} root: {error!r}'
        message = str(error)
        assert root in message and 'refus' in message and 'delete the folder yourself' in message, message
        named = [p for p in before if p != '.' and before[p][0] != 'dir' and p in message]
        assert 1 <= len(named) <= 3, message


def test_refuses_a_root_that_is_a_file_or_holds_a_link(tmp_path):
    """A file given as root, and a root holding only a link (to real data elsewhere), are not empty folders."""
    from beit_mm.data.demo.root import NotADemoRootError
    real = make_real_imagenet(str(tmp_path / 'imagenet'))
    (tmp_path / 'file').write_text('not a folder\n')
    linked = tmp_path / 'linked'
    linked.mkdir()
    os.symlink(osp.join(real, 'train'), linked / 'train')
    before = snapshot(real)
    with pytest.raises(NotADemoRootError, match='is a file'):
        make_demo_imagenet(str(tmp_path / 'file'), 2, 1, 1, 16)
    with pytest.raises(NotADemoRootError, match=r'found: train.*refuses'):
        make_demo_imagenet(str(linked), 2, 1, 1, 16)
    assert changes(before, snapshot(real)) == [] and os.listdir(linked) == ['train']


def test_refuses_a_demo_root_of_the_other_generator(tmp_path):
    root = make_demo_imagenet(str(tmp_path / 'in'), 2, 1, 1, 16)
    from beit_mm.data.demo.root import NotADemoRootError
    before = snapshot(root)
    with pytest.raises(NotADemoRootError, match='make_demo_imagenet'):
        make_demo_ade20k(root, 2, 1, 32)
    assert changes(before, snapshot(root)) == []


# ------------------------------------------------------------------------------------- demo data: what still works
def test_existing_empty_folder_is_used_and_marked_first(tmp_path):
    """An existing empty folder (a fresh tmp dir) becomes a demo root; the marker names the generator and its
    arguments; a second call with the same arguments rewrites nothing, the marker included."""
    root = tmp_path / 'empty'
    root.mkdir()
    make_demo_ade20k(str(root), 2, 1, 32, seed=3)
    with open(root / MARKER) as f:
        marker = json.load(f)
    assert marker['generator'] == 'beit_mm.data.demo.make_demo_ade20k'
    assert marker['arguments'] == dict(num_train=2, num_val=1, size=32, seed=3, style='classes',
                                       with_annotations=True)
    before = snapshot(str(root))
    make_demo_ade20k(str(root), 2, 1, 32, seed=3)
    assert changes(before, snapshot(str(root))) == []


def test_a_half_made_demo_root_is_still_its_own(tmp_path, monkeypatch):
    """The marker is written first: a generator killed halfway (here the 5th image raises) leaves a root that the next
    call recognizes and completes, equal to a root made in one go."""
    from beit_mm.data.demo import imagenet as demo_imagenet
    draw, calls = demo_imagenet.make_demo_image, []

    def dies_at_the_fifth(*args):
        calls.append(args)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return draw(*args)

    monkeypatch.setattr(demo_imagenet, 'make_demo_image', dies_at_the_fifth)
    root = str(tmp_path / 'in')
    with pytest.raises(KeyboardInterrupt):
        make_demo_imagenet(root, 3, 2, 1, 16, seed=0)
    assert osp.isfile(osp.join(root, MARKER)) and not osp.isdir(osp.join(root, 'val'))
    monkeypatch.undo()
    make_demo_imagenet(root, 3, 2, 1, 16, seed=0)
    assert contents(root) == contents(make_demo_imagenet(str(tmp_path / 'whole'), 3, 2, 1, 16, seed=0))


def test_marked_root_is_regenerated_for_other_arguments(tmp_path):
    """Other arguments regenerate every split, also one whose count is unchanged (validation here): the root then
    holds what a new root made with them holds, marker included."""
    root = str(tmp_path / 'ade')
    make_demo_ade20k(root, 3, 1, 32)
    make_demo_ade20k(root, 2, 1, 32, style='shapes')
    assert contents(root) == contents(make_demo_ade20k(str(tmp_path / 'new'), 2, 1, 32, style='shapes'))
    with open(osp.join(root, MARKER)) as f:
        assert json.load(f)['arguments']['style'] == 'shapes'


def test_custom_demo_root_is_regenerated_for_other_arguments(tmp_path):
    """The custom layout's random stems change with the seed: the files of the old arguments go, and the root holds what
    a new root made with the new arguments holds."""
    root = str(tmp_path / 'custom')
    make_demo_custom(root, 3, 1, 32, seed=0)
    make_demo_custom(root, 2, 1, 32, seed=1)
    assert contents(root) == contents(make_demo_custom(str(tmp_path / 'new'), 2, 1, 32, seed=1))


def test_unmarked_complete_demo_root_is_reused_read_only(tmp_path):
    """A demo root written before the marker existed (exactly the files of this call, nothing else) is reused without
    writing anything; with other arguments it is refused like any folder that is not marked."""
    from beit_mm.data.demo.root import NotADemoRootError
    root = str(tmp_path / 'old_demo')
    make_demo_imagenet(root, 2, 2, 1, 16, ann_files=True)
    os.remove(osp.join(root, MARKER))
    before = snapshot(root)
    make_demo_imagenet(root, 2, 2, 1, 16, ann_files=True)
    assert changes(before, snapshot(root)) == []
    with pytest.raises(NotADemoRootError, match='delete the folder yourself'):
        make_demo_imagenet(root, 2, 2, 1, 16)  # would remove meta/*.txt
    assert changes(before, snapshot(root)) == []


# ------------------------------------------------------------------ demo data: ownership by journal (issue 48)
def _real_folder(path: str, count: int = 11) -> str:
    """A real folder of ``count`` images named like the demo's validation images (what a pattern would match)."""
    for i in range(1, count + 1):
        _write_image(osp.join(path, f'ADE_val_{i:08d}.jpg'), seed=i)
    return path


def _refused(call, *paths, match: str) -> None:
    """``call()`` raises NotADemoRootError matching ``match``, and no file under ``paths`` changes (bytes, mtime)."""
    from beit_mm.data.demo.root import NotADemoRootError
    before = [snapshot(p) for p in paths]
    with pytest.raises(NotADemoRootError, match=match):
        call()
    assert [changes(b, snapshot(p)) for b, p in zip(before, paths)] == [[]] * len(paths)


def test_a_link_inside_the_demo_root_is_never_followed(tmp_path, monkeypatch, capsys):
    """A demo root whose ``images/validation`` links to a real folder: every generator refuses a root holding a link
    at any depth, naming it; the real folder keeps every byte and mtime."""
    from ..conftest import load_tool
    real = _real_folder(str(tmp_path / 'real_images'))
    root = make_demo_ade20k(str(tmp_path / 'ade'), 2, 1, 32)
    import shutil
    shutil.rmtree(osp.join(root, 'images', 'validation'))
    os.symlink(real, osp.join(root, 'images', 'validation'))
    tool = load_tool('tools/make_demo_data.py')
    monkeypatch.setattr(sys, 'argv', ['make_demo_data.py', '--root', root, '--num-train', '2', '--num-val', '1',
                                      '--size', '32', '--seed', '1'])
    before = snapshot(real)
    with pytest.raises(SystemExit) as stop:
        tool.main()
    assert stop.value.code == 2 and changes(before, snapshot(real)) == []
    line = capsys.readouterr().err.strip()
    assert 'images/validation (a link or not a plain file)' in line and len(line.splitlines()) == 1, line
    _refused(lambda: make_demo_ade20k(root, 2, 1, 32), real, match=r'images/validation \(a link')
    # deeper: a class folder of the ImageNet demo, a split folder of the custom demo
    imagenet = make_demo_imagenet(str(tmp_path / 'in'), 2, 1, 1, 16)
    wnid = sorted(os.listdir(osp.join(imagenet, 'train')))[0]
    shutil.rmtree(osp.join(imagenet, 'train', wnid))
    os.symlink(real, osp.join(imagenet, 'train', wnid))
    _refused(lambda: make_demo_imagenet(imagenet, 3, 1, 1, 16), real, match=f'train/{wnid} \\(a link')
    custom = make_demo_custom(str(tmp_path / 'custom'), 2, 1, 32)
    os.symlink(osp.join(real, 'ADE_val_00000001.jpg'), osp.join(custom, 'images', 'val', 'x.jpg'))
    _refused(lambda: make_demo_custom(custom, 2, 1, 32, seed=5), real, match=r'images/val/x.jpg \(a link')


@pytest.mark.parametrize('same_arguments', [True, False])
def test_images_a_user_added_to_a_demo_root_are_not_deleted(tmp_path, same_arguments):
    """Images a user copied into a demo root (one named like the demo's own): the next run refuses, naming them, and
    changes nothing; a generated file the user edited counts as theirs too."""
    ade = make_demo_ade20k(str(tmp_path / 'ade'), 2, 1, 32)
    _write_image(osp.join(ade, 'images', 'training', 'ADE_train_00000009.jpg'), seed=9)
    _refused(lambda: make_demo_ade20k(ade, 2, 1, 32, seed=0 if same_arguments else 1), ade,
             match=r'images/training/ADE_train_00000009.jpg \(not written by the generator\).*move those entries')
    custom = make_demo_custom(str(tmp_path / 'custom'), 2, 1, 32)
    _write_image(osp.join(custom, 'images', 'train', 'my_photo.jpg'), seed=3)
    _write_image(osp.join(custom, 'masks', 'train', 'my_photo.png'), mask=True, seed=3)
    _refused(lambda: make_demo_custom(custom, 2, 1, 32, seed=0 if same_arguments else 1), custom,
             match=r'my_photo')
    imagenet = make_demo_imagenet(str(tmp_path / 'in'), 2, 1, 1, 16)
    edited = osp.join(imagenet, 'val', sorted(os.listdir(osp.join(imagenet, 'val')))[0])
    edited = osp.join(edited, os.listdir(edited)[0])
    _write_image(edited, seed=11)
    _refused(lambda: make_demo_imagenet(imagenet, 2, 1, 1, 16, seed=0 if same_arguments else 1), imagenet,
             match=r'changed since the generator wrote it')


def test_a_forged_marker_opens_no_real_root(real_roots):
    """A forged ``.beit_mm_demo.json`` in a real ADE20K root proves nothing: with no journal, a journal that does not
    list the files with their content, or one that calls real files temporary, the root is refused, every byte kept."""
    root = real_roots['ade20k']
    arguments = dict(num_train=2, num_val=1, size=32, seed=0, style='classes', with_annotations=True)
    _write_text(osp.join(root, MARKER), json.dumps(dict(generator='beit_mm.data.demo.make_demo_ade20k',
                                                        arguments=arguments)))
    _refused(lambda: make_demo_ade20k(root, 2, 1, 32), root, match='a marker proves nothing by itself')
    real = sorted(p for p, v in snapshot(root).items() if v[0] not in ('dir', 'link') and p != MARKER)
    for journal in (''.join(f'{"0" * 64} {p}\n' for p in real),  # listed, another content
                    ''.join(f'part {p}\n' for p in real)):  # "temporary files"
        _write_text(osp.join(root, '.beit_mm_demo.files'), journal)
        _refused(lambda: make_demo_ade20k(root, 2, 1, 32), root, match='refuse')


def test_a_new_generator_gets_the_journal_through_the_shared_helpers(tmp_path):
    """A generator written as the existing ones (``claim_demo_root`` + the file room's write helpers) journals every
    file: its second call rewrites nothing, and a file a user added is refused, not deleted."""
    from beit_mm.data.demo.root import KEEP, claim_demo_root, save_demo_image, write_demo_file

    def make(root, n):
        files = [f'img/{i}.png' for i in range(n)] + ['classes.txt']
        if claim_demo_root(root, 'tests.make_demo_new', dict(n=n), files) != KEEP:
            for i in range(n):
                save_demo_image(Image.fromarray(np.full((4, 4), i, np.uint8), mode='L'), osp.join(root, files[i]))
            write_demo_file(osp.join(root, 'classes.txt'), 'a\nb\n')
        return root

    root = make(str(tmp_path / 'new'), 3)
    before = snapshot(root)
    make(root, 3)
    assert changes(before, snapshot(root)) == []
    _write_image(osp.join(root, 'img', 'mine.jpg'))
    _refused(lambda: make(root, 2), root, match=r'img/mine.jpg \(not written')


# ---------------------------------------------------------------------------------------- checkpoint hook
def _hook_runner(work_dir: str) -> types.SimpleNamespace:
    name = f'data_safety_{osp.basename(work_dir)}'
    return types.SimpleNamespace(work_dir=work_dir, logger=MMLogger.get_instance(name),
                                 message_hub=MessageHub.get_instance(name))


@pytest.mark.parametrize('by_epoch', [False, True])
def test_checkpoint_hook_deletes_only_its_own_partial_files(tmp_path, by_epoch):
    """Its unfinished writes (``<checkpoint name>.beit_mm.part``, ``last_checkpoint.beit_mm.part``) go; another
    program's ``.part`` files (a download of a checkpoint, an editor's file) and other files stay, byte-identical."""
    step = 'epoch' if by_epoch else 'iter'
    ours = [name + PARTIAL_SUFFIX for name in (f'{step}_3.pth', f'best_mIoU_{step}_2.pth', 'last_checkpoint')]
    foreign = ['notes.part', 'model.safetensors.part', 'iter_3.pth.part.bak', 'best.part', f'{step}_x.pth.part',
               f'{step}_3.pth.part', 'last_checkpoint.part', f'{step}_x.pth{PARTIAL_SUFFIX}',
               f'{step}_3.pth', 'last_checkpoint']
    for name in ours + foreign:
        (tmp_path / name).write_bytes(name.encode())
    before = snapshot(str(tmp_path))
    AtomicCheckpointHook(interval=1, by_epoch=by_epoch).before_train(_hook_runner(str(tmp_path)))
    assert sorted(os.listdir(tmp_path)) == sorted(foreign)
    assert {p: v for p, v in snapshot(str(tmp_path)).items() if p in foreign} == {p: before[p] for p in foreign}


def test_checkpoint_hook_with_its_own_template_and_out_dir(tmp_path):
    """``filename_tmpl`` and ``out_dir`` are the hook's: ``ckpt_0003.pt.beit_mm.part`` in ``out_dir/<work dir name>``
    goes, ``iter_3.pth.beit_mm.part`` there is not its name; ``last_checkpoint.beit_mm.part`` is looked for in the work
    dir."""
    work, out = tmp_path / 'work', tmp_path / 'out'
    (out / 'work').mkdir(parents=True)
    work.mkdir()
    for path in (out / 'work' / 'ckpt_0003.pt', out / 'work' / 'iter_3.pth', work / 'last_checkpoint',
                 work / 'ckpt_0003.pt'):
        (path.parent / (path.name + PARTIAL_SUFFIX)).write_bytes(b'x')
    AtomicCheckpointHook(interval=1, filename_tmpl='ckpt_{:04d}.pt', out_dir=str(out)).before_train(
        _hook_runner(str(work)))
    assert sorted(os.listdir(out / 'work')) == ['iter_3.pth' + PARTIAL_SUFFIX]
    assert sorted(os.listdir(work)) == ['ckpt_0003.pt' + PARTIAL_SUFFIX]


# ----------------------------------------------------------------------------------------- train.py work dir
def test_check_new_run_work_dir(tmp_path):
    from beit_mm.fileio.work_dir import WorkDirInUseError, check_new_run_work_dir
    work = tmp_path / 'work'
    check_new_run_work_dir(str(work), None, False)  # absent
    work.mkdir()
    (work / '20260101_000000').mkdir()
    (work / 'config.py').write_text('')
    (work / 'iter_2.pth.part').write_text('')
    check_new_run_work_dir(str(work), None, False)  # logs and a leftover, no checkpoint
    for name in ('last_checkpoint', 'best_mIoU_iter_4.pth', 'epoch_1.pth', 'iter_2.pth'):
        (work / name).write_text(name)
        with pytest.raises(WorkDirInUseError, match=rf'{work} holds .*newest: {name}.*--resume.*--overwrite.*'
                           r'--work-dir'):
            check_new_run_work_dir(str(work), None, False)
        os.utime(work / name, ns=(0, 0))  # older than the next one
    check_new_run_work_dir(str(work), 'auto', False)
    check_new_run_work_dir(str(work), str(work / 'iter_2.pth'), False)
    check_new_run_work_dir(str(work), None, True)


def _train(work_dir: str, data_root: str, *extra: str) -> subprocess.CompletedProcess:
    data = [f'{dl}.dataset.data_root={data_root}' for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    return run_tool([TRAIN, TINY_CONFIG, '--work-dir', work_dir, *extra, '--cfg-options', 'train_cfg.max_iters=2',
                     'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=2', *data])


def test_train_refuses_a_work_dir_with_checkpoints_unless_overwrite(tmp_path):
    """An earlier run's iter_2.pth: a new run exits 2 with one line (work dir, newest checkpoint, the three ways out)
    and leaves it byte-identical; with --overwrite the run trains and replaces it."""
    data_root = make_demo_ade20k(str(tmp_path / 'ade'), 4, 1, size=64)
    work = tmp_path / 'work'
    work.mkdir()
    (work / 'iter_2.pth').write_bytes(b'an earlier run\'s checkpoint')
    (work / 'last_checkpoint').write_text(str(work / 'iter_2.pth'))
    before = snapshot(str(work))
    proc = _train(str(work), data_root)
    assert changes(before, snapshot(str(work))) == [], proc.stdout[-2000:]
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(work) in lines[0] and 'iter_2.pth' in lines[0], proc.stderr
    assert all(way in lines[0] for way in ('--resume', '--overwrite', '--work-dir')), lines[0]

    proc = _train(str(work), data_root, '--overwrite')
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert 'Iter(train) [2/2]' in proc.stdout + proc.stderr
    assert (work / 'iter_2.pth').read_bytes() != b'an earlier run\'s checkpoint'


def _setup_env(venv: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', osp.join(ROOT, 'tools', 'setup_env.sh')], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, BEIT_MM_VENV=venv, **env))


def test_setup_env_deletes_only_a_venv_it_marked(tmp_path):
    """``tools/setup_env.sh`` with ``BEIT_MM_VENV`` naming a folder it did not make: exit 2, every file kept; while
    another build holds the lock it waits, then gives up untouched."""
    import fcntl
    mine = tmp_path / 'my_project'
    mine.mkdir()
    (mine / 'notes.txt').write_text('mine')
    proc = _setup_env(str(mine))
    assert proc.returncode == 2, proc.stderr
    assert 'is not a venv this script made' in proc.stderr and 'nothing was deleted' in proc.stderr
    assert (mine / 'notes.txt').read_text() == 'mine' and sorted(os.listdir(mine)) == ['notes.txt']

    building = tmp_path / 'venv'
    building.mkdir()
    (building / '.beit_mm_venv').write_text(f'beit_mm venv {building}\n')  # another build's venv, in progress
    with open(str(building) + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = _setup_env(str(building), BEIT_MM_SETUP_LOCK_TIMEOUT='1')
    assert proc.returncode == 1 and 'holds' in proc.stderr and 'nothing was changed' in proc.stderr, proc.stderr
    assert sorted(os.listdir(building)) == ['.beit_mm_venv']


def test_setup_env_mark_proves_ownership_by_its_content(tmp_path):
    """An empty or foreign ``.beit_mm_venv`` in a folder of yours is no licence to delete it: exit 2, every file
    kept."""
    mine = tmp_path / 'my_project'
    mine.mkdir()
    (mine / 'notes.txt').write_text('mine')
    for content in ('', f'beit_mm venv {tmp_path / "other"}\n'):
        (mine / '.beit_mm_venv').write_text(content)
        proc = _setup_env(str(mine))
        assert proc.returncode == 2 and 'nothing was deleted' in proc.stderr, proc.stderr
        assert (mine / 'notes.txt').read_text() == 'mine'
