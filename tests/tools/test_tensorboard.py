"""tools/train.py --tensorboard: a tiny training run's TensorBoard event file holds the logged scalars (read back with
tensorboard's EventAccumulator): losses, lr and the validation metrics of a segmentation run, mim_acc of a MIM run,
and the codebook statistics of a dVAE run."""
import glob
import os.path as osp

import torch

from ..conftest import run_tool


def _train_scalars(config: str, work_dir: str, options: list[str]) -> dict[str, list[float]]:
    """Run tools/train.py --tensorboard and return {tag: values} of the one event file it writes."""
    proc = run_tool(['tools/train.py', config, '--tensorboard', '--work-dir', work_dir, '--cfg-options', *options])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    events = glob.glob(osp.join(work_dir, '*', 'vis_data', 'events.out.tfevents.*'))
    assert len(events) == 1, events
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(events[0])
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()['scalars']}


def test_segmentation_run_logs_loss_lr_and_metrics(ade_demo_root, tmp_path):
    scalars = _train_scalars(
        'tests/configs/tiny_beit_upernet_ade_demo.py', str(tmp_path / 'seg'),
        ['train_cfg.max_iters=2', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2',
         'default_hooks.visualization.interval=100'] +
        [f'{dl}.dataset.data_root={ade_demo_root}' for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader')])
    for tag in ('loss', 'lr', 'decode.loss_ce', 'aAcc', 'mIoU', 'mAcc'):
        assert tag in scalars, sorted(scalars)
    assert len(scalars['loss']) == 2 and all(v > 0 for v in scalars['loss'])
    assert len(scalars['mIoU']) == 1 and 0 <= scalars['mIoU'][0] <= 100


def test_mim_run_logs_mim_acc(ade_demo_root, tmp_path):
    from beit_mm.models.tokenizers.dalle import DALLEEncoder
    tokenizer = tmp_path / 'tokenizer.pth'
    torch.save({'state_dict': DALLEEncoder(group_count=4, n_hid=32, n_blk_per_group=1, vocab_size=512).state_dict()},
               tokenizer)
    scalars = _train_scalars(
        'configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py', str(tmp_path / 'mim'),
        ['train_cfg.max_iters=2', 'default_hooks.logger.interval=1', 'train_dataloader.batch_size=2',
         'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
         f'train_dataloader.dataset.data_root={ade_demo_root}', f'model.target_generator.init_cfg.checkpoint={tokenizer}'])
    assert {'loss', 'lr', 'mim_acc'} <= set(scalars), sorted(scalars)
    assert all(0 <= v <= 1 for v in scalars['mim_acc'])


def test_dvae_run_logs_codebook_usage(ade_demo_root, tmp_path):
    scalars = _train_scalars(
        'configs/demo/dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py', str(tmp_path / 'dvae'),
        ['train_cfg.max_iters=2', 'default_hooks.logger.interval=1', 'train_dataloader.batch_size=2',
         'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
         f'train_dataloader.dataset.data_root={ade_demo_root}'])
    assert {'loss', 'loss_rec', 'lr', 'codebook_usage', 'perplexity'} <= set(scalars), sorted(scalars)
    assert all(0 < v <= 1 for v in scalars['codebook_usage'])
