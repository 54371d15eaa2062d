"""Wrong files and outputs give one named message with the fix, before any work, instead of a raw traceback."""
from __future__ import annotations

import errno
import os.path as osp
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from beit_mm.apis import CheckpointFileError, CheckpointMismatchError, build_from_config
from beit_mm.engine.resume import check_resumable
from beit_mm.apis.train import TrainingRefused, train
from beit_mm.apis.convert import ConversionError, convert_checkpoint
from beit_mm.fileio.outputs import OutputError, atomic_file, check_output

from ..conftest import ROOT, load_tool
from ..fileio.test_hostile_files import MIM, runner_checkpoint  # noqa: F401  (a module fixture; ade_demo_root: conftest)
from .test_tools import CONFIG, _cfg


@pytest.fixture(scope='module')
def files(tmp_path_factory) -> dict:
    """A whole checkpoint of the tiny segmentor, the same truncated, one of another width, a state dict only."""
    root = tmp_path_factory.mktemp('files')
    cfg = Config.fromfile(CONFIG)
    torch.manual_seed(0)
    model = build_from_config(cfg)
    paths = {name: str(root / f'{name}.pth') for name in ('whole', 'truncated', 'other', 'weights')}
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, paths['whole'])
    data = open(paths['whole'], 'rb').read()
    open(paths['truncated'], 'wb').write(data[:len(data) // 2])
    cfg.model.backbone.arch = dict(embed_dims=64, num_layers=4, num_heads=2, mlp_ratio=2.0)
    cfg.model.neck.embed_dim = 64
    cfg.model.decode_head.in_channels = [64] * 4
    torch.save({'state_dict': build_from_config(cfg).state_dict()}, paths['other'])
    torch.save(model.state_dict(), paths['weights'])
    return paths


def test_truncated_checkpoint_to_convert_and_infer(files, tmp_path, monkeypatch):
    with pytest.raises(ConversionError, match=r'truncated\.pth is truncated or corrupt.*Fix: download/copy it again'):
        convert_checkpoint(files['truncated'], str(tmp_path / 'hf'), to='hf', config=CONFIG, part='backbone')
    image = str(tmp_path / 'x.png')
    from PIL import Image
    Image.new('RGB', (64, 64)).save(image)
    monkeypatch.setattr(sys, 'argv', ['infer.py', CONFIG, files['truncated'], image, '--out-dir',
                                      str(tmp_path / 'out')])
    with pytest.raises(SystemExit, match=r'infer\.py: error: checkpoint .*truncated\.pth is truncated or corrupt'):
        load_tool('tools/infer.py').main()


def test_another_models_checkpoint_to_export_infer_and_probe(files, tmp_path, monkeypatch):
    from beit_mm.models.builder import load_for_features as probe_model
    shapes = r'does not fit the model .*shapes differ for .*backbone\.cls_token \(1, 1, 64\) vs \(1, 1, 32\)'
    with pytest.raises(SystemExit, match=r'export\.py: error: .*other\.pth.*' + shapes):
        load_tool('tools/export.py').main([CONFIG, files['other'], '--shape', '64', '64', '--out',
                                           str(tmp_path / 'm.onnx')])
    assert not osp.exists(tmp_path / 'm.onnx')
    with pytest.raises(CheckpointMismatchError, match=shapes):
        probe_model(CONFIG, files['other'])
    image = str(tmp_path / 'x.png')
    from PIL import Image
    Image.new('RGB', (64, 64)).save(image)
    monkeypatch.setattr(sys, 'argv', ['infer.py', CONFIG, files['other'], image, '--out-dir', str(tmp_path / 'o')])
    with pytest.raises(SystemExit, match=r'infer\.py: error: .*' + shapes):
        load_tool('tools/infer.py').main()
    assert not osp.exists(tmp_path / 'o' / 'pred')


def test_resume_refuses_weights_only_other_models_and_a_dropped_ema(files, runner_checkpoint,  # noqa: F811
                                                                     ade_demo_root, tmp_path):
    from beit_mm.engine.resume import StartCheckpointError, check_start_checkpoint, set_resume
    cfg = _cfg(ade_demo_root, str(tmp_path / 'work'))
    with pytest.raises(StartCheckpointError, match=r'--resume: .*weights\.pth holds weights but no training state.*'
                       r'Fix: to start a new run from these weights pass --cfg-options load_from='):
        set_resume(cfg, files['weights'])
    with_ema = dict(runner_checkpoint, ema_state_dict={})
    torch.save(with_ema, str(tmp_path / 'ema.pth'))
    with pytest.raises(CheckpointFileError, match=r'saved by a run with --ema.*Fix: resume with --ema'):
        check_resumable(str(tmp_path / 'ema.pth'), with_ema=False)
    assert check_resumable(str(tmp_path / 'ema.pth'), with_ema=True)['meta']['iter'] == 2
    other = dict(runner_checkpoint, state_dict=torch.load(files['other'], weights_only=True)['state_dict'])
    torch.save(other, str(tmp_path / 'other_run.pth'))
    set_resume(cfg, str(tmp_path / 'other_run.pth'))  # a whole training checkpoint: accepted here ...
    runner = Runner.from_cfg(cfg)
    with pytest.raises(StartCheckpointError,
                       match=r'train: .*other_run\.pth \(--resume\) does not fit the model.*shapes differ'):
        check_start_checkpoint(runner, cfg)  # ... refused once the model is built, before runner.train()


def test_resume_reads_a_pre_1_6_checkpoint(runner_checkpoint, ade_demo_root, tmp_path):  # noqa: F811
    from beit_mm.engine.resume import set_resume
    from beit_mm.engine.hooks.rng_state import checkpoint_seed
    legacy = str(tmp_path / 'legacy.pth')
    torch.save(dict(runner_checkpoint, meta=dict(runner_checkpoint['meta'], seed=7)), legacy,
               _use_new_zipfile_serialization=False)
    # was: "mmap can only be used..."
    set_resume(_cfg(ade_demo_root, str(tmp_path / 'w')), legacy)
    assert checkpoint_seed(legacy) == 7


def test_onnx_option_given_a_checkpoint(files, tmp_path):
    from beit_mm.apis.export import onnx_metadata
    with pytest.raises(ValueError, match=r'whole\.pth is not an ONNX model: a PyTorch checkpoint.*without --onnx'):
        onnx_metadata(files['whole'])


def test_truncated_safetensors_and_non_image_input(tmp_path, monkeypatch):
    from safetensors.torch import save_file
    full = str(tmp_path / 'model.safetensors')
    save_file({'embeddings.cls_token': torch.zeros(1, 1, 8)}, full)
    cut = str(tmp_path / 'cut.safetensors')
    open(cut, 'wb').write(open(full, 'rb').read()[:40])
    with pytest.raises(ConversionError, match=r'cut\.safetensors is not a whole safetensors file.*download/copy it '
                       'again'):
        convert_checkpoint(cut, str(tmp_path / 'o.pth'), model='beit', source='hf')
    text = tmp_path / 'notes.jpg'
    text.write_text('not an image')
    monkeypatch.setattr(sys, 'argv', ['infer.py', CONFIG, str(tmp_path), str(text)])
    with pytest.raises(SystemExit, match=r'infer\.py: error: input .*notes\.jpg is not an image \(its header is none of .*Fix: '):
        load_tool('tools/infer.py').main()


def test_outputs_checked_at_start(files, tmp_path, monkeypatch):
    convert = load_tool('tools/convert_checkpoint.py')
    folder = tmp_path / 'a_folder'
    folder.mkdir()
    with pytest.raises(SystemExit, match=r'output .*a_folder is a folder; the output is a file'):
        convert.main(['--to', 'timm', files['whole'], str(folder), '--config', MIM])
    blocker = tmp_path / 'a_file'
    blocker.write_text('x')
    with pytest.raises(OutputError, match=r'a_file is a file, not a folder'):
        check_output(str(blocker / 'sub' / 'model.onnx'))
    existing = tmp_path / 'probe.json'
    existing.write_text('{}')
    monkeypatch.setattr(sys, 'argv', ['probe.py', CONFIG, files['whole'], '--imagenet-root', str(tmp_path / 'in'),
                                      '--out', str(existing)])
    with pytest.raises(SystemExit, match=r'probe\.py: error: output .*probe\.json exists; nothing was written.*--overwrite'):
        load_tool('tools/analysis/probe.py').main()  # before any model is built or image read
    assert existing.read_text() == '{}'


def test_a_full_disk_leaves_the_old_file(tmp_path):
    """ENOSPC while writing: a named error, the old file intact, no temporary file left."""
    path = tmp_path / 'model.pth'
    path.write_text('old')
    with pytest.raises(OutputError, match=r'the disk is full writing .*model\.pth; nothing was written'):
        with atomic_file(str(path)) as tmp:
            open(tmp, 'w').write('half')
            raise OSError(errno.ENOSPC, 'No space left on device')
    assert path.read_text() == 'old' and sorted(p.name for p in tmp_path.iterdir()) == ['model.pth']


def test_missing_official_checkpoint_names_its_source_and_command(tmp_path, monkeypatch):
    """A full-size config whose converted official weights are missing: training refuses before building anything (exit
    2), naming the official file, where it is published and the converter command from its model index entry."""
    config = osp.join(ROOT, 'configs', 'beit', 'beit-base_upernet_8xb2-160k_ade20k-640x640.py')
    monkeypatch.chdir(tmp_path)  # no checkpoints/ here
    with pytest.raises(TrainingRefused) as stopped:
        train(config, work_dir=str(tmp_path / 'work'))
    err = str(stopped.value)
    assert 'model.backbone.init_cfg.checkpoint = checkpoints/beit-base_pt22k-ft22k.pth does not exist' in err
    assert ('it is converted from beit_base_patch16_224_pt22k_ft22k.pth (unilm); HF '
            'microsoft/beit-base-patch16-224-pt22k-ft22k, published at https://github.com/microsoft/unilm/tree/master/'
            'beit; once downloaded, run: python tools/convert_checkpoint.py --model beit --source unilm '
            'beit_base_patch16_224_pt22k_ft22k.pth checkpoints/beit-base_pt22k-ft22k.pth') in err
    assert 'Traceback' not in err and not osp.exists(tmp_path / 'work' / 'vis_data')


def test_study_config_without_its_teacher_or_data(tmp_path, monkeypatch):
    """The VQ-KD study config without its teacher run or its unlabeled pool: tools/train.py names the missing teacher
    run first, then the missing pool, each in one line, exit 2."""
    config = osp.join(ROOT, 'configs', 'studies', 'vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingRefused) as stopped:
        train(config, work_dir=str(tmp_path / 'work'))
    err = str(stopped.value)
    assert 'model.teacher.backbone.init_cfg.checkpoint = ' \
        'work_dirs/vqkd_teacher/iter_3000.pth does not exist' in err and "config's header" in err, err
    (tmp_path / 'work_dirs' / 'vqkd_teacher').mkdir(parents=True)
    (tmp_path / 'work_dirs' / 'vqkd_teacher' / 'iter_3000.pth').write_bytes(b'')  # present; its content is not read
    with pytest.raises(TrainingRefused) as stopped:
        train(config, work_dir=str(tmp_path / 'work'))
    err = str(stopped.value)
    assert ('[train_dataloader] the image folder data/shapes_unlabeled/images/training does not exist') in err \
        and 'FileNotFoundError' not in err, err
