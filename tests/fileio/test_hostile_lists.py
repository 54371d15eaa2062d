"""What a list declares is bounded while it is read, only recorded leftovers are removed, and every name a tool prints
or refuses with is one escaped line with exit code 2: one hostile file per class, built in the test."""
from __future__ import annotations

import os
import os.path as osp
import sys
import types

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MessageHub, MMLogger

from beit_mm.data.checks import DatasetCheckError, check_split_folders
from beit_mm.engine.hooks.atomic_checkpoint import AtomicCheckpointHook
from beit_mm.fileio import CheckpointFileError, open_checkpoint
from beit_mm.fileio.outputs import PARTIAL_SUFFIX, atomic_write_bytes

from ..tools.test_tools import CONFIG

REPEATS = 1_000_000  # one name repeated: 28 MB of split file; mmseg's dataset made ~1 GB of it


def _split_config(tmp_path, demo_root: str, lines: str, **dataset) -> str:
    """The tiny test config, its training set read through the split file ``lines`` (names without suffix)."""
    split = tmp_path / 'train.txt'
    split.write_text(lines)
    cfg = Config.fromfile(CONFIG)
    for loader in ('train_dataloader', 'val_dataloader'):
        cfg[loader].dataset.data_root = demo_root
    cfg.train_dataloader.dataset.update(ann_file=str(split), **dataset)
    path = str(tmp_path / 'split_config.py')
    cfg.dump(path)
    return path


def _demo_names(demo_root: str) -> list[str]:
    return sorted(osp.splitext(n)[0] for n in os.listdir(osp.join(demo_root, 'images', 'training')))


# ------------------------------------------------------------------- what a list declares is bounded while read
def test_split_naming_one_file_a_million_times_is_refused_while_read(tmp_path, ade_demo_root):
    """The config check before any dataset is built reads the split line by line and stops at the first repeat."""
    name = _demo_names(ade_demo_root)[0]
    cfg = Config.fromfile(_split_config(tmp_path, ade_demo_root, f'{name}\n' * REPEATS))
    with pytest.raises(DatasetCheckError, match=rf'\[train_dataloader\] .*train\.txt: line 2 names {name} again '
                       r'\(first on line 1\); a split file names each file once.*Fix: delete the repeated lines'):
        check_split_folders(cfg)


@pytest.mark.parametrize('reader', ['split', 'classes.txt', 'config', 'checkpoint'])
def test_a_name_of_900000_characters_is_refused_by_every_reader(tmp_path, ade_demo_root, reader):
    """One rule (``MAX_NAME_CHARS``) for a file name of a split, a class name of ``classes.txt``, of a config's
    ``metainfo`` and of a checkpoint's ``dataset_meta``."""
    long = 'n' * 900_000
    message = r'is a name of 900000 characters \(n+\.\.\.\(900000 chars\)\.\.\.n+\), more than the 256 a name may ' \
        'have'
    if reader == 'checkpoint':
        path = str(tmp_path / 'meta.pth')
        torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'dataset_meta': {'classes': ('road', long)}}}, path)
        with pytest.raises(CheckpointFileError, match=r'meta\.dataset_meta\.classes\[1\] ' + message):
            open_checkpoint(path)
    elif reader == 'classes.txt':
        from beit_mm.data.datasets.custom import read_classes
        (tmp_path / 'classes.txt').write_text(f'road\n{long}\n')
        with pytest.raises(DatasetCheckError, match=r'classes\.txt: line 2 ' + message):
            read_classes(str(tmp_path / 'classes.txt'))
    else:
        names = _demo_names(ade_demo_root)
        lines, dataset = (f'{names[0]}\n{long}\n', {}) if reader == 'split' else (
            '\n'.join(names) + '\n', dict(metainfo=dict(classes=('road', long))))
        cfg = Config.fromfile(_split_config(tmp_path, ade_demo_root, lines, **dataset))
        where = r'train\.txt: line 2 ' if reader == 'split' else r'train_dataloader\.dataset\.metainfo\.classes\[1\] '
        with pytest.raises(DatasetCheckError, match=where + message):
            check_split_folders(cfg)


def _build_probe(clean: str, hostile: str, results) -> None:
    """In a forked child (its peak RSS starts at the parent's present RSS): check and build the clean split's
    training set, then the hostile one's as training does (config check, then the dataset); ``results`` gets
    ``(error class or 'built', MiB of peak RSS grown past the clean run's peak)``."""
    import resource

    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS

    def peak_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    init_default_scope('mmseg')
    for path in (clean, hostile):
        cfg = Config.fromfile(path)
        try:
            check_split_folders(cfg, ['train_dataloader'])
            len(DATASETS.build(cfg.train_dataloader.dataset))
            outcome = 'built'
        except Exception as error:  # noqa: BLE001  (reported to the test)
            outcome = type(error).__name__
        if path == clean:
            control = peak_mib()
            assert outcome == 'built', outcome
    results.put((outcome, round(peak_mib() - control)))


def test_a_repeating_split_costs_what_a_clean_one_costs(tmp_path, ade_demo_root):
    """Checked and built as training does, in a fresh (forked) process: the split of the demo images, then the split
    naming one of them a million times, which is refused by name within 64 MiB of the clean run's peak."""
    import multiprocessing
    names = _demo_names(ade_demo_root)
    (tmp_path / 'clean').mkdir()
    (tmp_path / 'hostile').mkdir()
    clean = _split_config(tmp_path / 'clean', ade_demo_root, '\n'.join(names) + '\n')
    hostile = _split_config(tmp_path / 'hostile', ade_demo_root, f'{names[0]}\n' * REPEATS)
    context = multiprocessing.get_context('fork')
    results = context.Queue()
    child = context.Process(target=_build_probe, args=(clean, hostile, results))
    child.start()
    outcome, grown = results.get(timeout=600)
    child.join(60)
    assert outcome == 'DatasetCheckError' and grown <= 64, (outcome, f'peak RSS grew {grown} MiB past the clean run')


# ------------------------------------------------------------------------- only recorded leftovers are removed
def test_another_programs_partial_checkpoint_stays(tmp_path):
    """A browser's partial download of ``iter_80000.pth`` (``iter_80000.pth.part``) is no write of this library: the
    start-of-run cleanup and a save of that very checkpoint leave it byte-identical; the hook's own leftover goes."""
    download = tmp_path / 'iter_80000.pth.part'
    download.write_bytes(b'half of a download')
    own = tmp_path / ('iter_4.pth' + PARTIAL_SUFFIX)
    own.write_bytes(b'half of a save')
    runner = types.SimpleNamespace(work_dir=str(tmp_path), logger=MMLogger.get_instance('hostile_lists'),
                                   message_hub=MessageHub.get_instance('hostile_lists'))
    AtomicCheckpointHook(interval=1, by_epoch=False).before_train(runner)
    atomic_write_bytes(b'a whole checkpoint', str(tmp_path / 'iter_80000.pth'))
    assert download.exists() and download.read_bytes() == b'half of a download', 'another program\'s .part file was removed'
    assert sorted(os.listdir(tmp_path)) == ['iter_80000.pth', 'iter_80000.pth.part']


# ------------------------------------------------------------------- one way to print a name, one way to refuse
HOSTILE_NAME = 'ADE_\x1b]0;owned\x07\x1b[2J\nmmengine - INFO - dataset check passed.jpg'  # a name holds no '/'


def test_a_file_name_with_an_escape_sequence_and_a_newline_is_printed_escaped(tmp_path, ade_demo_root, monkeypatch,
                                                                               capsys):
    """``tools/analysis/check_dataset.py`` names an image without annotation whose name holds an escape sequence and
    a newline followed by a forged log line: the name is printed escaped, the forged line never starts a line."""
    import shutil

    from ..conftest import load_tool
    root = str(tmp_path / 'ade')
    shutil.copytree(ade_demo_root, root)
    images = osp.join(root, 'images', 'training')
    shutil.copy(osp.join(images, sorted(os.listdir(images))[0]), osp.join(images, HOSTILE_NAME))
    monkeypatch.setattr(sys, 'argv', ['check_dataset.py', CONFIG, '--splits', 'train', '--cfg-options',
                                      f'train_dataloader.dataset.data_root={root}'])
    assert load_tool('tools/analysis/check_dataset.py').main() == 1
    out = capsys.readouterr().out
    assert '1 image(s) without an annotation file' in out, out
    assert '\x1b' not in out and '\x07' not in out, 'an escape sequence was printed raw'
    assert not [line for line in out.splitlines() if line.startswith('mmengine - INFO')], 'a log line was forged'
    assert 'ADE_\\x1b]0;owned\\x07\\x1b[2J\\x0ammengine - INFO - dataset check passed.jpg' in out


def test_a_stride_0_optimizer_state_is_one_line_and_exit_2(tmp_path, ade_demo_root, capsys):
    """``tools/train.py --resume`` of a checkpoint whose ``exp_avg`` has strides (0, 0) over one element: a named
    refusal, as every other: one line ``train.py: error: ...`` and exit status 2."""
    from ..conftest import load_tool
    hostile = str(tmp_path / 'hostile.pth')
    torch.save({'state_dict': {'w': torch.ones(3, 4)}, 'meta': {'iter': 2},
                'optimizer': {'state': {0: {'exp_avg': torch.zeros(1).expand(3, 4)}}, 'param_groups': []}}, hostile)
    options = [f'{loader}.dataset.data_root={ade_demo_root}' for loader in ('train_dataloader', 'val_dataloader',
                                                                           'test_dataloader')]
    with pytest.raises(SystemExit) as stopped:
        load_tool('tools/train.py').main([CONFIG, '--work-dir', str(tmp_path / 'work'), '--resume', hostile,
                                          '--cfg-options', *options])
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2, f'exit status {stopped.value.code}: {stopped.value}'
    assert err[-1].startswith('train.py: error: --resume: ') and 'has strides (0, 0)' in err[-1], err[-3:]
