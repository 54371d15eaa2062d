"""Bad checkpoint files, MIM masks that are too small, NaN/inf losses and atomic checkpoint writes: named errors.

- checkpoint files: missing, empty, truncated (a zip without its central directory), not a checkpoint (HTML page,
  JPEG), a pickled module, a CvT file given to a BEiT and the reverse, a whole segmentor without
  ``prefix='backbone.'``; each message names the file and the fix;
- MIM: ``num_masking_patches < min_num_patches`` is refused (unilm issue 551); unilm's own generator (the reference in
  ``tests/data/test_masking.py``) with ``--num_mask_patches 1`` gives empty masks, which is what makes the loss NaN;
- NaN guard: a real Runner whose weights turn NaN after iteration 1 stops at iteration 2 with the loss terms and
  hints, and writes no checkpoint of the NaN weights; under an enabled fp16 loss scaler the hook defers;
- atomic writes: a checkpoint file exists only when complete; ``--resume`` falls back to the newest complete one.
"""
import os
import os.path as osp
import types

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import MMLogger
from mmengine.optim import OptimWrapper
from mmengine.runner import Runner

from beit_mm.fileio import CheckpointFileError, load_state_dict_file
from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.data.transforms.masking import BEiTMaskGenerator, BlockwiseMaskGenerator, TooFewMaskedPatchesError
from beit_mm.fileio.checkpoint import is_complete_checkpoint
from beit_mm.fileio.outputs import PARTIAL_SUFFIX, AtomicLocalBackend, atomic_write_bytes
from beit_mm.fileio.work_dir import find_last_complete_checkpoint
from beit_mm.engine.hooks import NonFiniteLossError, NonFiniteLossHook
from beit_mm.models.backbones.beit import BEiT
from beit_mm.models.backbones.cvt import CvT
from beit_mm.registry import HOOKS

from ..data.test_masking import _NumpyAsRandom, UnilmMaskingGenerator
from .test_runner import runners_started_in_one_second

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
BEIT_ARCH = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=16)
CVT_ARCH = dict(embed_dims=[16, 32, 48], depths=[1, 1, 2], num_heads=[1, 2, 3])


def _beit(checkpoint: str, **init) -> BEiT:
    return BEiT(**BEIT_ARCH, init_cfg=dict(type='Pretrained', checkpoint=checkpoint, **init))


@pytest.fixture
def beit_file(tmp_path) -> str:
    path = str(tmp_path / 'beit.pth')
    torch.save({'state_dict': BEiT(**BEIT_ARCH).state_dict()}, path)
    return path


def test_missing_and_empty_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'checkpoint .*nope\.pth does not exist\. Fix: check the path'):
        _beit(str(tmp_path / 'nope.pth')).init_weights()
    (tmp_path / 'empty.pth').write_bytes(b'')
    with pytest.raises(CheckpointFileError, match=r'empty\.pth is empty \(0 bytes\)\. Fix: download/copy it again'):
        _beit(str(tmp_path / 'empty.pth')).init_weights()


def test_truncated_checkpoint(beit_file, tmp_path):
    data = open(beit_file, 'rb').read()
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(CheckpointFileError, match=rf'{cut} is truncated or corrupt \({len(data) // 2} bytes.*'
                       r'Fix: download/copy it again'):
        _beit(str(cut)).init_weights()


@pytest.mark.parametrize('content, what', [(b'<!DOCTYPE html><html>Sign in</html>', 'an HTML/XML page'),
                                           (b'\xff\xd8\xff\xe0\x00\x10JFIF', 'a JPEG image'),
                                           (b'version https://git-lfs.github.com/spec/v1\n', 'a Git LFS pointer')])
def test_not_a_checkpoint(tmp_path, content, what):
    path = tmp_path / 'weights.pth'
    path.write_bytes(content)
    with pytest.raises(CheckpointFileError, match=rf'weights\.pth is not a PyTorch checkpoint \(\d+ bytes, {what}\)'
                       r'\. Fix: point to the \.pth/\.bin weights file'):
        _beit(str(path)).init_weights()


def test_pickled_module_is_refused_with_the_converter_hint(tmp_path):
    path = str(tmp_path / 'module.pth')
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(CheckpointFileError, match=r'holds pickled Python objects .*Fix: convert it once with '
                       r'tools/convert_checkpoint\.py'):
        load_state_dict_file(path)


def test_cvt_checkpoint_given_to_beit_and_the_reverse(beit_file, tmp_path):
    cvt_file = str(tmp_path / 'cvt.pth')
    torch.save({'state_dict': CvT(arch=CVT_ARCH).state_dict()}, cvt_file)
    with pytest.raises(CheckpointFileError, match=r'cvt\.pth holds a CvT \(beit_mm or official microsoft/CvT names\) '
                       r"state dict \(keys like \['stage0\..*but this backbone \(BEiT\) is a BEiT .*Fix: give a "
                       r'checkpoint of this architecture'):
        _beit(cvt_file).init_weights()
    with pytest.raises(CheckpointFileError, match=r'beit\.pth holds a BEiT .* but this backbone \(CvT\) is a CvT'):
        CvT(arch=CVT_ARCH, init_cfg=dict(type='Pretrained', checkpoint=beit_file)).init_weights()


def test_segmentor_checkpoint_without_prefix(tmp_path):
    segmentor = {f'backbone.{k}': v for k, v in BEiT(**BEIT_ARCH).state_dict().items()}
    segmentor['decode_head.conv_seg.weight'] = torch.zeros(150, 32, 1, 1)
    path = str(tmp_path / 'segmentor.pth')
    torch.save({'state_dict': segmentor, 'meta': {}}, path)
    with pytest.raises(CheckpointFileError, match=r"segmentor\.pth is a whole segmentor/classifier/MIM model .*but "
                       r"init_cfg has no prefix\. Fix: init_cfg=dict\(type='Pretrained', checkpoint=\.\.\., "
                       r"prefix='backbone\.'\)"):
        _beit(path).init_weights()
    _beit(path, prefix='backbone.').init_weights()  # the fix works


def test_resume_from_a_truncated_file_is_refused_before_the_run(beit_file, tmp_path):
    from beit_mm.engine.resume import StartCheckpointError, set_resume
    data = open(beit_file, 'rb').read()
    cut = tmp_path / 'iter_4.pth'
    cut.write_bytes(data[:-100])
    with pytest.raises(StartCheckpointError,
                       match=r'--resume: .*iter_4\.pth is truncated or corrupt.*tools/train\.py --resume picks the '
                       r'last complete one'):
        set_resume(Config(dict(work_dir=str(tmp_path))), str(cut))


def test_too_few_masked_patches_is_a_named_error():
    with pytest.raises(TooFewMaskedPatchesError, match=r'num_masking_patches=1 < min_num_patches=16.*NaN \(unilm '
                       r'issue 551.*Fix: mask about 40% of the grid'):
        BEiTMaskGenerator(input_size=14, num_masking_patches=1)
    with pytest.raises(TooFewMaskedPatchesError, match='min_num_patches=16'):
        BEiTMaskGenerator(input_size=4, mask_ratio=0.4)  # 6 patches on a 4x4 grid with the default blocks of 16
    BlockwiseMaskGenerator(14, 16, min_num_patches=16)  # the boundary is allowed
    # why: unilm's generator with --num_mask_patches 1 (its blocks default to >= 16 patches in pretraining) gives
    # many empty masks; an all-empty batch has no masked token, so the mean cross-entropy is NaN
    draws = _NumpyAsRandom(np.random.default_rng(0))
    reference = UnilmMaskingGenerator(14, 1, min_num_patches=16)
    empty = sum(int(reference(draws).sum() == 0) for _ in range(400)) / 400
    assert empty > 0.2, empty
    logits, labels = torch.zeros(0, 8192), torch.zeros(0, dtype=torch.long)
    assert torch.isnan(torch.nn.functional.cross_entropy(logits, labels))


class _PoisonWeightsHook(Hook):
    """Test-only: after iteration 1, sets the decode head's classifier to NaN (what a diverged step leaves)."""

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter == 0:
            with torch.no_grad():
                runner.model.decode_head.conv_seg.weight.fill_(float('nan'))


HOOKS.register_module(module=_PoisonWeightsHook, force=True)


def test_nan_loss_stops_with_iteration_terms_and_hints(tmp_path):
    root = make_demo_ade20k(str(tmp_path / 'ade'), 4, 1, size=64)
    cfg = Config.fromfile(CONFIG)
    for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[dl].dataset.data_root = root
    cfg.work_dir = str(tmp_path / 'work')
    cfg.train_cfg.val_interval = 100
    cfg.custom_hooks = [dict(type='beit_mm.NonFiniteLossHook'),
                        dict(type='beit_mm._PoisonWeightsHook', priority='LOWEST')]
    runner = Runner.from_cfg(cfg)
    with pytest.raises(NonFiniteLossError) as info:
        runner.train()
    message = str(info.value)
    print(message)
    assert message.startswith('non-finite loss at iteration 2: loss=nan, decode.loss_ce=nan (non-finite: loss, '
                              'decode.loss_ce). Hints: lower the learning rate')
    assert 'lower the learning rate (now lr 0.000' in message  # PolyLR from 1e-3 over 4 iterations
    assert 'enable gradient clipping (optim_wrapper.clip_grad=dict(max_norm=3.0))' in message
    assert 'the run is fp32 (no AMP)' in message and 'check_dataset.py' in message
    assert os.listdir(cfg.work_dir) and not os.path.exists(osp.join(cfg.work_dir, 'iter_2.pth'))  # interval 2


def _runner_stub(optim_wrapper) -> types.SimpleNamespace:
    return types.SimpleNamespace(iter=6, logger=MMLogger.get_current_instance(), optim_wrapper=optim_wrapper,
                                 cfg=Config(dict(optim_wrapper=dict(clip_grad=dict(max_norm=1.0)))))


def test_nan_guard_defers_to_the_fp16_loss_scaler():
    model = torch.nn.Linear(2, 2)
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    hook = NonFiniteLossHook(max_skipped=3)
    nan = {'loss': torch.tensor(float('nan')), 'decode.loss_ce': torch.tensor(float('inf'))}
    with pytest.raises(NonFiniteLossError, match=r'iteration 7: loss=nan, decode.loss_ce=inf .*gradient clipping is on '
                       r"\(\{'max_norm': 1.0\}\)"):
        hook.after_train_iter(_runner_stub(wrapper), 0, None, nan)
    wrapper.loss_scaler = torch.amp.GradScaler('cpu', enabled=True)  # what AmpOptimWrapper(dtype=float16) holds
    stub = _runner_stub(wrapper)
    hook.after_train_iter(stub, 0, None, nan)  # skipped by the scaler: a warning
    hook.after_train_iter(stub, 0, None, {'loss': torch.tensor(1.0)})  # a finite step resets the count
    hook.after_train_iter(stub, 0, None, nan)
    hook.after_train_iter(stub, 0, None, nan)
    with pytest.raises(NonFiniteLossError):
        hook.after_train_iter(stub, 0, None, nan)  # 3 consecutive skips


def test_atomic_write_and_last_complete_checkpoint(beit_file, tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    data = open(beit_file, 'rb').read()
    AtomicLocalBackend().put(data, str(work / 'iter_2.pth'))
    assert is_complete_checkpoint(str(work / 'iter_2.pth')) and not (work / ('iter_2.pth' + PARTIAL_SUFFIX)).exists()

    def dies_halfway(f, payload):
        f.write(payload[:len(payload) // 2])
        raise KeyboardInterrupt  # the writer dies after half of the bytes

    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(data, str(work / 'iter_4.pth'), write=dies_halfway)
    # an error inside the process removes the half-written .part; the final name was never touched
    assert not (work / 'iter_4.pth').exists() and not (work / ('iter_4.pth' + PARTIAL_SUFFIX)).exists()
    # what a SIGKILL leaves instead (tests/fileio/test_atomic_writers.py kills real writers): a .part, never the final name
    (work / ('iter_4.pth' + PARTIAL_SUFFIX)).write_bytes(data[:len(data) // 2])
    (work / 'last_checkpoint').write_text(str(work / 'iter_2.pth'))
    assert find_last_complete_checkpoint(str(work)) == str(work / 'iter_2.pth')
    # what MMEngine's own hook can leave: last_checkpoint naming a truncated or deleted file
    (work / 'iter_6.pth').write_bytes(data[:1000])
    (work / 'last_checkpoint').write_text(str(work / 'iter_6.pth'))
    assert find_last_complete_checkpoint(str(work)) == str(work / 'iter_2.pth')
    (work / 'last_checkpoint').write_text(str(work / 'iter_8.pth'))
    assert find_last_complete_checkpoint(str(work)) == str(work / 'iter_2.pth')
    assert find_last_complete_checkpoint(str(tmp_path / 'none')) is None
    np.testing.assert_equal(is_complete_checkpoint(str(work / 'iter_6.pth')), False)


def test_two_runners_started_in_one_second_keep_their_own_visualizer(tmp_path, monkeypatch):
    """conftest's ``_own_runner_names``: MMEngine names a runner's visualizer ``<experiment>_<start second>``, and a
    second runner of the same second got the first one's (writing into the first work dir, deleted by then: a
    FileNotFoundError seen once in a full run); with the configs' fixed visualizer name, every later runner of the
    process got the first one's. The clock is frozen here so that both start in one second."""
    def fixed_name(cfg):
        cfg.visualizer.name = 'visualizer'  # default_runtime's fixed name: MMEngine's get_instance would reuse it

    visualizers = [runner.visualizer
                   for runner in runners_started_in_one_second(tmp_path, monkeypatch, Runner.from_cfg, fixed_name)]
    assert visualizers[0] is not visualizers[1]
    assert visualizers[1]._vis_backends['LocalVisBackend']._save_dir.startswith(str(tmp_path / 'second'))
