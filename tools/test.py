"""Test (and evaluate) a checkpoint (the CLI of mmseg 1.2.2's ``tools/test.py``).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out DIR] [--show] [--show-dir DIR] [--wait-time S]
                                           [--tta] [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]
    bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]

- ``--show``/``--show-dir``: turn on drawing of ``default_hooks.visualization`` (``SegVisualizationHook``);
  ``--show-dir`` sets the visualizer's ``save_dir`` (overlays under ``<show-dir>/vis_data/vis_image/``, one every
  ``default_hooks.visualization.interval`` test iterations).
- ``--out DIR``: ``test_evaluator.output_dir=DIR`` and ``keep_results=True`` (prediction PNGs for offline evaluation).
- ``--tta``: test ``cfg.tta_model`` wrapping ``cfg.model`` with ``cfg.tta_pipeline``.
- SyncBN and CPU distributed runs: as in ``tools/train.py`` (:mod:`beit_mm.engine.launch`).

``runner.test()`` logs the metrics (mIoU, mAcc, aAcc for ``IoUMetric``).
"""
import argparse
import os
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.engine.launch import adapt_cfg_to_launcher, init_cpu_process_group


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (and evaluate) a model with beit_mm')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the dir for logs and metrics (default: work_dirs/<config stem>)')
    parser.add_argument('--out', type=str, help='directory for the predicted label maps (offline evaluation)')
    parser.add_argument('--show', action='store_true', help='show prediction results in a window')
    parser.add_argument('--show-dir', help='directory where painted images are saved')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value pairs, e.g. test_dataloader.batch_size=1')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none', help='job launcher')
    parser.add_argument('--tta', action='store_true', help='test time augmentation (cfg.tta_model, cfg.tta_pipeline)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def trigger_visualization_hook(cfg: Config, args: argparse.Namespace) -> Config:
    """Turn on ``default_hooks.visualization`` drawing for ``--show``/``--show-dir``."""
    default_hooks = cfg.default_hooks
    if 'visualization' not in default_hooks:
        raise RuntimeError("--show/--show-dir need a visualization hook: add default_hooks.visualization="
                           "dict(type='SegVisualizationHook') to the config.")
    visualization_hook = default_hooks['visualization']
    visualization_hook['draw'] = True
    if args.show:
        visualization_hook['show'] = True
        visualization_hook['wait_time'] = args.wait_time
    if args.show_dir:
        if 'visualizer' not in cfg:
            raise RuntimeError("--show-dir needs a visualizer: add visualizer=dict(type='SegLocalVisualizer', "
                               "vis_backends=[dict(type='LocalVisBackend')]) to the config.")
        cfg.visualizer['save_dir'] = args.show_dir
    return cfg


def main() -> None:
    args = parse_args()
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    cfg.load_from = args.checkpoint
    if args.show or args.show_dir:
        cfg = trigger_visualization_hook(cfg, args)
    if args.tta:
        if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
            raise RuntimeError('--tta needs cfg.tta_model and cfg.tta_pipeline in the config (see mmseg\'s '
                               "configs/_base_/datasets/ade20k.py: tta_model=dict(type='SegTTAModel')).")
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.tta_model.module = cfg.model
        cfg.model = cfg.tta_model
    if args.out is not None:
        cfg.test_evaluator['output_dir'] = args.out
        cfg.test_evaluator['keep_results'] = True
    adapt_cfg_to_launcher(cfg, args.launcher)
    init_cpu_process_group(args.launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.test()


if __name__ == '__main__':
    main()
