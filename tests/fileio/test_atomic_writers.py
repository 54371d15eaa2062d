"""Killed writers never leave a partial file: each writer (convert, ONNX export, ``--to hf``/``--to timm``, the training
checkpoint) is SIGKILLed at 20 random moments while overwriting a complete old output, which must then hold the old
content, the complete new one, or nothing; at least one kill must land mid-write."""
from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
import random
import shutil
import signal
import sys
import time
from collections import Counter

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.models.backbones.beit import BEiT

from ..conftest import ROOT, load_tool
from ..tools.test_tools import CONFIG

MIM = osp.join(ROOT, 'configs', 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')
TRIALS = 20
pytestmark = pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs os.fork')


def fingerprint(path: str) -> str:
    """A digest of what ``path`` holds, read completely (raises on a partial file)."""
    if osp.isdir(path):
        return hashlib.sha256(''.join(f'{name}:{fingerprint(osp.join(path, name))}'
                                      for name in sorted(os.listdir(path))).encode()).hexdigest()
    digest = hashlib.sha256()
    if path.endswith('.json'):
        digest.update(json.dumps(json.load(open(path)), sort_keys=True).encode())
    elif path.endswith('.safetensors'):
        from safetensors.torch import load_file
        for key, value in sorted(load_file(path).items()):
            digest.update(key.encode() + value.numpy().tobytes())
    elif path.endswith('.onnx'):
        import onnx
        from onnx import numpy_helper
        for init in sorted(onnx.load(path).graph.initializer, key=lambda t: t.name):
            digest.update(init.name.encode() + numpy_helper.to_array(init).tobytes())
    else:  # torch.save files: every tensor (torch.save writes a fresh serialization id each time)
        obj = torch.load(path, map_location='cpu', weights_only=True)
        weights = obj.get('state_dict', obj)
        for key, value in sorted(weights.items()):
            digest.update(key.encode() + (value.numpy().tobytes() if torch.is_tensor(value) else repr(value).encode()))
    return digest.hexdigest()


def state(path: str, old: str, new: str) -> str:
    if not osp.lexists(path):
        return 'nothing'
    try:
        found = fingerprint(path)
    except Exception as error:  # noqa: BLE001  (any read error is a partial file)
        return f'PARTIAL ({type(error).__name__})'
    return {old: 'old', new: 'new'}.get(found, 'OTHER')


def _child(write, end_file: str | None = None) -> None:
    """Run ``write`` in this forked child and exit without running the parent's cleanup; with ``end_file``, record
    when ``write`` returned."""
    code = 0
    try:
        write()
        if end_file is not None:
            with open(end_file, 'w') as f:
                f.write(repr(time.monotonic()))
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)


def _partial_names(folder: str) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(('.part', '.old'))] if osp.isdir(folder) else []


def _wait_for_write_start(pid: int, folder: str) -> tuple[float, bool]:
    """Poll ``folder`` until a temporary ``.part`` name appears (the write began) or the child exits; returns (the
    moment, whether the child still runs)."""
    while not _partial_names(folder):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return time.monotonic(), False
        time.sleep(2e-4)
    return time.monotonic(), True


def write_duration(write, folder: str, tmp_dir: str) -> float:
    """Seconds from the first temporary name to the writer's return, in an uninterrupted forked run."""
    end_file = osp.join(tmp_dir, 'end')
    pid = os.fork()
    if pid == 0:
        _child(write, end_file)
    began, running = _wait_for_write_start(pid, folder)
    if running:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, 'the reference write failed'
    assert osp.exists(end_file), 'the reference write failed'
    return max(float(open(end_file).read()) - began, 1e-3)


def kill_trials(write, dst: str, restore_old, old: str, new: str, tmp_dir: str, seed: int = 0) -> Counter:
    """``TRIALS`` times: restore the old output, fork ``write``, wait until its temporary file appears, SIGKILL it at a
    moment drawn uniformly from the reference write's duration, classify the destination."""
    folder = osp.dirname(osp.abspath(dst))
    span = write_duration(write, folder, tmp_dir)
    rng = random.Random(seed)
    outcomes = Counter()
    for _ in range(TRIALS):
        restore_old()
        pid = os.fork()
        if pid == 0:
            _child(write)
        _, running = _wait_for_write_start(pid, folder)
        if running:
            time.sleep(rng.uniform(0, span))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        outcome = state(dst, old, new)
        outcomes[outcome] += 1
        leftovers = _partial_names(folder)
        outcomes['mid-write'] += bool(leftovers)
        if outcome == 'new' and not leftovers and not outcomes['mid-write']:
            span /= 2
        for name in leftovers:
            path = osp.join(folder, name)
            shutil.rmtree(path) if osp.isdir(path) else os.remove(path)
    return outcomes


def _assert_outcomes(name: str, outcomes: Counter) -> None:
    print(f'{name}: {TRIALS} kills -> {dict(outcomes)}')
    bad = [k for k in outcomes if k not in ('old', 'new', 'nothing', 'mid-write')]
    assert not bad, f'{name}: a killed write left {bad}: {dict(outcomes)}'
    assert outcomes['mid-write'] >= 1, f'no kill landed during the write: {dict(outcomes)}'


def _run_twice(tmp_path, write_with, dst: str, snapshot: str) -> tuple[str, str, callable]:
    """Write the OLD output (``write_with('old')``), keep a copy, compute both fingerprints; returns (old, new,
    restore_old) with the NEW output's fingerprint from an uninterrupted ``write_with('new')`` run."""
    write_with('old')()
    old = fingerprint(dst)
    (shutil.copytree if osp.isdir(dst) else shutil.copy2)(dst, snapshot)
    write_with('new')()
    new = fingerprint(dst)
    assert old != new

    def restore_old():  # the snapshot's kind decides: a kill between atomic_dir's two renames leaves no dst at all
        if osp.isdir(snapshot):
            if osp.lexists(dst):
                shutil.rmtree(dst)
            shutil.copytree(snapshot, dst)
        else:
            shutil.copy2(snapshot, dst)
    return old, new, restore_old


def _randomized_checkpoint(cfg: Config, path: str, seed: int) -> str:
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return path


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # forked children run torch ops: no OpenMP pool inherited mid-use
    yield
    torch.set_num_threads(threads)


def test_convert_checkpoint_killed(tmp_path):
    convert = load_tool('tools/convert_checkpoint.py')
    sources = {}
    for version, seed in (('old', 0), ('new', 1)):
        torch.manual_seed(seed)
        backbone = BEiT(arch=dict(embed_dims=256, num_layers=6, num_heads=4, mlp_ratio=4.0), img_size=64)
        sources[version] = str(tmp_path / f'{version}_src.pth')
        torch.save({'model': backbone.state_dict()}, sources[version])
    dst = str(tmp_path / 'out' / 'beit.pth')

    def write_with(version):
        return lambda: convert.main(['--model', 'beit', '--source', 'timm', sources[version], dst, '--overwrite'])
    old, new, restore = _run_twice(tmp_path, write_with, dst, str(tmp_path / 'snapshot.pth'))
    _assert_outcomes('convert_checkpoint.py', kill_trials(write_with('new'), dst, restore, old, new, str(tmp_path)))


def test_export_onnx_killed(tmp_path):
    export = load_tool('tools/export.py')
    cfg = Config.fromfile(CONFIG)  # the tiny segmentor, widened so that its file (~20 MB) takes a while to write
    cfg.model.backbone.arch = dict(embed_dims=256, num_layers=6, num_heads=4, mlp_ratio=4.0)
    cfg.model.neck.embed_dim = 256
    cfg.model.decode_head.in_channels = [256] * 4
    config = str(tmp_path / 'wide.py')
    cfg.dump(config)
    checkpoints = {v: _randomized_checkpoint(cfg, str(tmp_path / f'{v}.pth'), s) for v, s in (('old', 0), ('new', 1))}
    dst = str(tmp_path / 'out' / 'model.onnx')

    def write_with(version):
        return lambda: export.main([config, checkpoints[version], '--shape', '64', '64', '--out', dst, '--no-check',
                                    '--overwrite'])
    old, new, restore = _run_twice(tmp_path, write_with, dst, str(tmp_path / 'snapshot.onnx'))
    _assert_outcomes('export.py (ONNX)', kill_trials(write_with('new'), dst, restore, old, new, str(tmp_path)))


@pytest.mark.parametrize('to', ['hf', 'timm'])
def test_hub_writers_killed(tmp_path, to):
    convert = load_tool('tools/convert_checkpoint.py')
    cfg = Config.fromfile(MIM)
    config = str(tmp_path / 'config.py')
    cfg.dump(config)
    checkpoints = {v: _randomized_checkpoint(cfg, str(tmp_path / f'{v}.pth'), s) for v, s in (('old', 0), ('new', 1))}
    dst = str(tmp_path / 'out' / ('hf' if to == 'hf' else 'beit.pth'))

    def write_with(version):
        return lambda: convert.main(['--to', to, checkpoints[version], dst, '--config', config, '--overwrite'])
    old, new, restore = _run_twice(tmp_path, write_with, dst, str(tmp_path / ('snapshot' if to == 'hf' else
                                                                              'snapshot.pth')))
    _assert_outcomes(f'--to {to}', kill_trials(write_with('new'), dst, restore, old, new, str(tmp_path)))
    if to == 'timm':  # its JSON is written the same way; after the uninterrupted runs it is the new one
        write_with('new')()
        assert json.load(open(str(tmp_path / 'out' / 'beit.json')))['pretrained_cfg_overlay']['file'] == dst


def test_training_checkpoint_save_killed(tmp_path):
    from mmengine.runner.checkpoint import save_checkpoint

    from beit_mm.fileio.outputs import ATOMIC_BACKEND
    dst = str(tmp_path / 'out' / 'iter_2.pth')
    states = {}
    for version, seed in (('old', 0), ('new', 1)):
        torch.manual_seed(seed)
        model = BEiT(arch=dict(embed_dims=256, num_layers=6, num_heads=4, mlp_ratio=4.0), img_size=64)
        states[version] = {'state_dict': model.state_dict(), 'meta': {'iter': 2}}

    def write_with(version):
        return lambda: save_checkpoint(states[version], dst, backend_args=dict(backend=ATOMIC_BACKEND))
    old, new, restore = _run_twice(tmp_path, write_with, dst, str(tmp_path / 'snapshot.pth'))
    _assert_outcomes('training checkpoint save', kill_trials(write_with('new'), dst, restore, old, new,
                                                             str(tmp_path)))


def test_completeness_check_refuses_an_archive_missing_tensor_records(tmp_path):
    """What an exception inside ``torch.save`` leaves (the archive closed with ``data.pkl`` but without the tensor
    records it did not reach) is not a complete checkpoint; the whole file is, and so is a pre-1.6 (non-zip) file."""
    import zipfile

    from beit_mm.apis import CheckpointFileError, open_checkpoint
    from beit_mm.fileio.checkpoint import is_complete_checkpoint
    whole = str(tmp_path / 'iter_2.pth')
    torch.save({'state_dict': {'a': torch.ones(3), 'b': torch.zeros(4)}, 'meta': {'iter': 2}}, whole)
    cut = str(tmp_path / 'iter_4.pth')
    with zipfile.ZipFile(whole) as src, zipfile.ZipFile(cut, 'w') as dst:
        names = src.namelist()
        last_record = max(n for n in names if '/data/' in n and n.split('/')[-1].isdigit())
        for name in names:
            if name != last_record:
                dst.writestr(src.getinfo(name), src.read(name))
    assert any(n.endswith('data.pkl') for n in zipfile.ZipFile(cut).namelist())  # what the former check accepted
    assert is_complete_checkpoint(whole) and not is_complete_checkpoint(cut)
    with pytest.raises(CheckpointFileError, match=r'cannot read checkpoint .*iter_4\.pth.*truncated or corrupt'):
        open_checkpoint(cut)
    legacy = str(tmp_path / 'legacy.pth')
    torch.save({'state_dict': {'a': torch.ones(3)}}, legacy, _use_new_zipfile_serialization=False)
    assert open_checkpoint(legacy)['state_dict']['a'].sum() == 3
