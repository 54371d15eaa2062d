"""Runs at scale, on CPU with 2 gloo processes (tools/dist_train.sh): per-rank randomness of the ImageNet fine-tuning
recipes, resuming with another number of processes, one voice per message.

The fine-tuning run inherits the real BEiT v2 fine-tuning config (its ``randomness``, Mixup/CutMix and drop path)
with a tiny model on the demo ImageNet set: 16 images of 4 classes, 2 processes x 4 images, 1 epoch = 2 iterations.
``tests/support/rank_draws.py`` records each process's mixed labels and drop-path masks.
"""
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

from beit_mm.data.demo.imagenet import make_demo_imagenet

from ..conftest import ROOT

FINETUNE = osp.join(ROOT, 'configs', 'beit2', 'beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py')
IMAGES, BATCH = 16, 4

TINY_FINETUNE = '''
_base_ = [{base!r}]
custom_imports = dict(imports=['beit_mm', 'tests.support.rank_draws'], allow_failed_imports=False)
model = dict(
    data_preprocessor=dict(num_classes=5),
    backbone=dict(arch=dict(_delete_=True, embed_dims=48, num_layers=2, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=16,
                  init_cfg=None),
    neck=dict(in_channels=48),
    head=dict(num_classes=5, in_channels=48))
optim_wrapper = dict(_delete_=True, type='OptimWrapper',
                     optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
                     constructor='beit_mm.LayerDecayOptimWrapperConstructor',
                     paramwise_cfg=dict(layer_decay_rate=0.6, weight_decay_rule='unilm'))
train_dataloader = dict(
    batch_size={batch}, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root={root!r}, data_prefix='train', indices=list(range(0, 10 * {images}, 10)),
                 pipeline=[dict(type='LoadImageFromFile'), dict(type='RandomResizedCrop', scale=32),
                           dict(type='PackInputs')]))
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
train_cfg = dict(max_epochs={epochs}, val_interval=100)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1, max_keep_ckpts=5, save_best=None))
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook'), dict(type='beit_mm.RecordDrawsHook')]
'''


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
                PYTHON=sys.executable)


def _train(config: str, work_dir: str, processes: int, *args: str, check: bool = True) -> tuple[int, str]:
    if processes > 1:
        cmd = ['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), config, str(processes)]
    else:
        cmd = [sys.executable, osp.join(ROOT, 'tools', 'train.py'), config]
    proc = subprocess.run([*cmd, '--work-dir', work_dir, *args], cwd=osp.dirname(work_dir), env=_env(),
                          capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    if check:
        assert proc.returncode == 0, f'{" ".join(cmd)} exited {proc.returncode}:\n{output[-6000:]}'
    return proc.returncode, output


def _draws(work_dir: str, rank: int) -> dict:
    with open(osp.join(work_dir, f'draws_rank{rank}.json')) as f:
        return json.load(f)


def _mixing_weights(mix: list) -> tuple | None:
    """The (1 - lambda, lambda) pair (smaller first) of one batch's Mixup/CutMix soft labels: each sample's label is
    lambda * onehot(y) + (1 - lambda) * onehot(y of its partner); None when no sample has a partner of another
    class."""
    assert mix is not None, 'no Mixup/CutMix labels recorded'
    found = {tuple(sorted(v for v in row if v > 0)) for row in mix}
    found = {pair for pair in found if len(pair) == 2}
    assert len(found) <= 1, f'one lambda per batch expected: {found}'
    return found.pop() if found else None


def write_config(tmp: str, name: str, epochs: int, batch: int = BATCH) -> str:
    root = osp.join(tmp, 'imagenet_demo')
    if not osp.isdir(root):
        make_demo_imagenet(root, size=32)
    path = osp.join(tmp, name)
    with open(path, 'w') as f:
        f.write(TINY_FINETUNE.format(base=FINETUNE, root=root, batch=batch, images=IMAGES, epochs=epochs))
    return path


@pytest.fixture(scope='module')
def two_runs(tmp_path_factory) -> tuple[str, str, str]:
    """The same 2-process fine-tuning run (1 epoch, 2 iterations) twice: (config, work dir 1, work dir 2)."""
    tmp = str(tmp_path_factory.mktemp('scale'))
    config = write_config(tmp, 'tiny_finetune.py', epochs=1)
    dirs = [osp.join(tmp, f'run{i}') for i in (1, 2)]
    for work_dir in dirs:
        _train(config, work_dir, 2)
    return config, dirs[0], dirs[1]


def test_finetuning_ranks_draw_differently_and_repeat_with_the_seed(two_runs):
    """unilm seeds every process with ``seed + rank`` (beit2/run_class_finetuning.py:260, beit/...:228): the two
    processes draw other Mixup/CutMix choices and lambdas and other drop-path masks, and a second run with the same
    seed draws the same ones again (the sampler seed included)."""
    _, first, second = two_runs
    ranks = [_draws(first, r) for r in (0, 1)]
    assert len(ranks[0]['iters']) == len(ranks[1]['iters']) == IMAGES // (2 * BATCH)
    pairs = [[_mixing_weights(it['mix']) for it in rank['iters']] for rank in ranks]
    compared = [(p0, p1) for p0, p1 in zip(*pairs) if p0 is not None and p1 is not None]
    assert compared, f'no sample mixed with another class: {pairs}'
    assert all(p0 != p1 for p0, p1 in compared), f'both processes drew the same Mixup/CutMix lambda: {compared}'
    masks = [[m for it in rank['iters'] for m in it['drop_path']] for rank in ranks]
    assert masks[0] != masks[1], 'both processes drew the same drop-path masks'
    for rank in (0, 1):
        assert _draws(second, rank) == ranks[rank], f'rank {rank} drew otherwise in a second run with the same seed'


# --------------------------------------------------------------------------------------------------------------------
# Resuming with another number of processes (docs/faults.md, "Resuming with another number of GPUs")
# --------------------------------------------------------------------------------------------------------------------

def _checkpoint(path: str) -> dict:
    return torch.load(path, map_location='cpu', weights_only=True)


def _lrs(checkpoint: dict) -> list:
    return [group['lr'] for group in checkpoint['optimizer']['param_groups']]


def test_checkpoints_record_processes_batch_and_images_seen(two_runs):
    _, first, _ = two_runs
    meta = _checkpoint(osp.join(first, 'epoch_1.pth'))['meta']
    assert (meta['world_size'], meta['batch_size'], meta['accumulative_counts']) == (2, BATCH, 1)
    assert meta['iter'] == 2 and meta['samples_seen'] == IMAGES


def test_resume_with_another_global_batch_is_refused_with_the_fixes(two_runs, tmp_path):
    """The 2-process checkpoint (2 x 4 images per update) resumed in 1 process (1 x 4): one named line, exit 2."""
    config, first, _ = two_runs
    config = write_config(osp.dirname(config), 'tiny_finetune_2e.py', epochs=2)
    rc, output = _train(config, str(tmp_path / 'one'), 1, '--resume', osp.join(first, 'epoch_1.pth'), check=False)
    errors = [line for line in output.splitlines() if line.startswith('train.py: error:')]
    assert rc == 2 and len(errors) == 1, output[-3000:]
    assert ('global batch of 8 (2 processes x 4 images x 1 accumulation), this run has 4 (1 x 4 x 1)' in errors[0]
            and 'optim_wrapper.accumulative_counts=2' in errors[0] and 'train_dataloader.batch_size=8' in errors[0]
            and '--resume-schedule-in-samples' in errors[0]), errors[0]


def test_resume_schedule_in_samples_continues_counted_in_images(two_runs, tmp_path):
    """With --resume-schedule-in-samples, epoch 1 of 2 x 4 images (2 iterations) becomes 4 iterations of 1 x 4, and
    the run ends where a 1-process run of 2 epochs ends: iteration 8, 32 images seen, the same lr."""
    config, first, _ = two_runs
    config = write_config(osp.dirname(config), 'tiny_finetune_2e.py', epochs=2)
    _, output = _train(config, str(tmp_path / 'resumed'), 1, '--resume', osp.join(first, 'epoch_1.pth'),
                       '--resume-schedule-in-samples')
    assert 'iteration 2 -> 4' in output and 'counted in images seen (16 so far)' in output, output[-3000:]
    resumed = _checkpoint(str(tmp_path / 'resumed' / 'epoch_2.pth'))
    assert resumed['meta']['iter'] == 8 and resumed['meta']['samples_seen'] == 2 * IMAGES
    assert resumed['meta']['world_size'] == 1
    _train(config, str(tmp_path / 'fresh'), 1)
    fresh = _checkpoint(str(tmp_path / 'fresh' / 'epoch_2.pth'))
    assert fresh['meta']['iter'] == 8 and fresh['meta']['samples_seen'] == 2 * IMAGES
    # MMEngine's LinearLR warms up over end - begin - 1 steps: 39 x 8 images in the 2-process run, 79 x 4 in the
    # 1-process one, so the lr agree to about one iteration of warmup (1.3% here); unconverted (iteration 6 of 39
    # instead of 8 of 79) they would differ by 50%.
    assert _lrs(resumed) == pytest.approx(_lrs(fresh), rel=0.02)


def test_checkpoint_without_the_record_resumes_with_a_warning(two_runs, tmp_path):
    config, first, _ = two_runs
    config = write_config(osp.dirname(config), 'tiny_finetune_2e.py', epochs=2)
    old = _checkpoint(osp.join(first, 'epoch_1.pth'))
    for key in ('world_size', 'batch_size', 'accumulative_counts', 'samples_seen'):
        del old['meta'][key]
    torch.save(old, str(tmp_path / 'old.pth'))
    _, output = _train(config, str(tmp_path / 'run'), 1, '--resume', str(tmp_path / 'old.pth'))
    assert 'does not record the processes and batch it was trained with' in output, output[-3000:]


def test_two_processes_print_one_refusal_line(two_runs, tmp_path):
    """A refusal raised on both processes (the 2 x 4 checkpoint resumed by 2 x 2): both stop, rank 0 prints."""
    config, first, _ = two_runs
    config = write_config(osp.dirname(config), 'tiny_finetune_2e_b2.py', epochs=2, batch=2)
    rc, output = _train(config, str(tmp_path / 'two'), 2, '--resume', osp.join(first, 'epoch_1.pth'), check=False)
    errors = [line for line in output.splitlines() if line.startswith('train.py: error:')]
    assert rc != 0 and len(errors) == 1, output[-3000:]
    assert 'global batch of 8' in errors[0]
