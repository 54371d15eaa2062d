"""Train a model from a config (the CLI of mmseg 1.2.2's ``tools/train.py``, with ``--resume [CKPT]``).

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT] | --overwrite] [--amp] [--ema] [--compile [BACKEND]]
                                 [--tensorboard] [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]
    bash tools/dist_train.sh CONFIG GPUS [args]          # torchrun, also on CPU (gloo)

- ``--resume``: without a value, resume from the latest checkpoint in the work dir (a new run when there is none);
  with a path, from that file (opened once, safely, and checked against the model first:
  :mod:`beit_mm.engine.resume.start`).
- ``--overwrite``: start a new run in a work dir that holds another run's checkpoints, or resume into it from a
  checkpoint outside it (both refused otherwise: :mod:`beit_mm.fileio.work_dir`).
- A resumed checkpoint (``--resume``, or ``resume=True`` in the config, checked alike) steers training state only:
  ``beit_mm.CheckpointGuardHook`` (added to every run) validates every field MMEngine and beit_mm's hooks read from
  it against this run and drops everything else, before MMEngine uses any of it (:mod:`beit_mm.engine.resume`); a
  refusal is one ``train.py: error: ...`` line.
- ``--amp``: ``optim_wrapper.type='beit_mm.AmpOptimWrapper'`` with the dtype that is faster on this device
  (:func:`beit_mm.engine.amp_optim_wrapper.amp_dtype_for_device`): ``'bfloat16'`` on GPUs that support it and on CPUs
  with AVX512-BF16/AMX, ``'float16'`` with ``loss_scale='dynamic'`` on older GPUs; on a CPU without native bf16 it
  keeps fp32 and says so in one line (emulated bf16 is ~70x slower there).
- ``--ema``: keep an exponential moving average of the weights (unilm's ``--model_ema``, mmpretrain's ``EMAHook``):
  MMEngine's ``EMAHook`` with the config's ``ema_cfg`` or, without one, :data:`beit_mm.engine.hooks.ema.EMA_DEFAULTS`
  (unilm's decay 0.9999, i.e. ``momentum=1e-4``, one update per iteration). Validation and the saved checkpoints'
  ``state_dict`` are the EMA weights; the raw weights go to ``ema_state_dict`` (MMEngine swaps them), and
  ``--resume`` restores both.
- ``--compile [BACKEND]``: ``torch.compile(fullgraph=True)`` of the model on any device, with BACKEND (inductor
  unless named; ``aot_eager`` traces without generating code). Without it the config's ``compile`` setting applies
  (``configs/_base_/default_runtime*.py``: the whole model on CUDA): :mod:`beit_mm.engine.compile`, applied by
  ``beit_mm.CompileHook`` instead of MMEngine's compilation of ``train_step``.
- AdamW optimizers get ``fused=True`` where torch has a fused kernel for the device (CPU and CUDA in torch 2.13),
  unless the config sets ``fused`` or ``foreach`` itself.
- SyncBN rule: configs use ``norm_cfg=dict(type='SyncBN')``. A single-process run gets BN because MMEngine's Runner
  reverts SyncBN when not distributed; a distributed run without CUDA gets BN, the gloo backend and a CPU DDP wrapper
  from :func:`beit_mm.engine.launch.adapt_cfg_to_launcher`; distributed GPU runs keep SyncBN.

``--help`` answers before beit_mm is imported; importing it allow-lists MMEngine checkpoint types for torch >= 2.6's
``weights_only`` loading (``beit_mm.fileio``), and a config's types import the modules that register them.
"""
import argparse
import os

from mmengine.config import DictAction


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model with beit_mm')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models (default: work_dirs/<config stem>)')
    parser.add_argument('--resume', nargs='?', const='auto', default=None, metavar='CKPT',
                        help='resume training: without a value from the latest checkpoint in the work dir, else from '
                        'CKPT')
    parser.add_argument('--resume-schedule-in-samples', action='store_true',
                        help='resume a checkpoint trained with another global batch (processes x batch x '
                        'accumulation): continue at this batch with the schedule counted in images seen '
                        '(docs/faults.md, "Resuming with another number of GPUs")')
    parser.add_argument('--overwrite', action='store_true',
                        help='start a new run in a work dir that holds checkpoints of an earlier run; its files are '
                        'overwritten as the new run saves')
    parser.add_argument('--amp', action='store_true', help='enable automatic mixed precision training')
    parser.add_argument('--ema', action='store_true',
                        help="keep an EMA of the weights (the config's ema_cfg, default momentum 1e-4 = unilm's "
                        'decay 0.9999); validation and checkpoints use the EMA weights')
    parser.add_argument('--tensorboard', action='store_true',
                        help='also log scalars (losses, lr, metrics) to TensorBoard: <work_dir>/<timestamp>/vis_data')
    parser.add_argument('--compile', nargs='?', const='inductor', default=None, metavar='BACKEND',
                        help='torch.compile(fullgraph=True) the model on any device with this backend (default '
                        "inductor); without it the config's compile setting applies (CUDA only by default)")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of the config, key=value pairs, e.g. train_cfg.max_iters=100')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank; torchrun sets LOCAL_RANK.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv: list[str] | None = None) -> None:
    args = vars(parse_args(argv))
    del args['local_rank']  # in LOCAL_RANK now
    from beit_mm.fileio.names import refusal
    from beit_mm.apis.train import TrainingRefused, train
    from beit_mm.engine.launch import is_rank_zero
    try:
        train(**args)
    except TrainingRefused as refused:  # one line, no traceback, exit 2; every process stops, rank 0 speaks
        raise refusal('train.py', refused, speak=is_rank_zero()) from None


if __name__ == '__main__':
    main()
