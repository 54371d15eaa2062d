"""Does MIM pretraining help? Segmentation fine-tuning on the demo data twice with the same budget and seed: once from
a MIM checkpoint, once from scratch (``model.backbone.init_cfg=None``); prints both mIoUs, whichever wins.

    python tools/analysis/mim_vs_scratch.py MIM_CKPT [--iters 300] [--data-root data/ade_demo]
                                            [--work-dir work_dirs/mim_vs_scratch] [--workers 2]

MIM_CKPT: a checkpoint of configs/beit/beit-tiny-p16_1xb16-coslr-300i_demo-mim.py (e.g. from tools/run_chain.sh:
work_dirs/chain/mim/iter_300.pth). Config: configs/beit/beit-tiny-p16_mim-pre_upernet_1xb8-300i_ade20k-demo-64x64.py.
"""
import argparse
import os
import os.path as osp
import re
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = 'configs/beit/beit-tiny-p16_mim-pre_upernet_1xb8-300i_ade20k-demo-64x64.py'


def finetune(name: str, init: str, args: argparse.Namespace) -> float:
    """Train ``CONFIG`` with backbone init option ``init``; return the final validation mIoU (percent)."""
    persistent = 'True' if args.workers > 0 else 'False'
    options = [init, f'train_cfg.max_iters={args.iters}', f'train_cfg.val_interval={args.iters}',
               f'default_hooks.checkpoint.interval={args.iters}', 'randomness.seed=0']
    for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options += [f'{dl}.dataset.data_root={args.data_root}', f'{dl}.num_workers={args.workers}',
                    f'{dl}.persistent_workers={persistent}']
    work_dir = osp.join(args.work_dir, name)
    os.makedirs(work_dir, exist_ok=True)
    proc = subprocess.run([sys.executable, 'tools/train.py', CONFIG, '--work-dir', work_dir, '--cfg-options',
                           *options], cwd=ROOT, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    with open(osp.join(work_dir, 'train.log'), 'w') as f:
        f.write(log)
    found = re.findall(r'mIoU: ([0-9.]+)', log)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f'{name} run failed (exit {proc.returncode}); see {work_dir}/train.log:\n{log[-3000:]}')
    return float(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description='segmentation from a MIM checkpoint vs from scratch, same budget')
    parser.add_argument('mim_checkpoint')
    parser.add_argument('--iters', type=int, default=300)
    parser.add_argument('--data-root', default='data/ade_demo')
    parser.add_argument('--work-dir', default='work_dirs/mim_vs_scratch')
    parser.add_argument('--workers', type=int, default=2)
    args = parser.parse_args()
    if not osp.isfile(args.mim_checkpoint):
        raise FileNotFoundError(f'{args.mim_checkpoint} does not exist; run tools/run_chain.sh (stage mim) or the '
                                'MIM demo config first')
    mim = finetune('from_mim', f'model.backbone.init_cfg.checkpoint={osp.abspath(args.mim_checkpoint)}', args)
    scratch = finetune('from_scratch', 'model.backbone.init_cfg=None', args)
    print(f'[mim_vs_scratch] {CONFIG}, {args.iters} iterations, seed 0: '
          f'mIoU from MIM {mim:.2f} vs from scratch {scratch:.2f} (difference {mim - scratch:+.2f})')


if __name__ == '__main__':
    main()
