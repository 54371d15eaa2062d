"""Test (and evaluate) a checkpoint (the CLI of mmseg 1.2.2's ``tools/test.py``) over
:func:`beit_mm.apis.testing.run_test`.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out DIR] [--show] [--show-dir DIR] [--wait-time S]
                                           [--tta] [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]
    bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]

- ``--show``/``--show-dir``: turn on drawing of ``default_hooks.visualization`` (``SegVisualizationHook``);
  ``--show-dir`` sets the visualizer's ``save_dir`` (overlays under ``<show-dir>/vis_data/vis_image/``, one for every
  test image; under ``dist_test.sh`` with N processes, process 0's share only, about 1 in N: MMEngine's visualizer
  draws on process 0, and a warning says so).
- ``--out DIR``: ``test_evaluator.output_dir`` and ``keep_results=True`` (prediction PNGs for offline evaluation).
- ``--out`` and ``--show-dir`` are output folders (new, empty, or written by an earlier run, whose files
  ``--overwrite`` replaces, only those), checked before anything is built and filled when the test ends
  (:class:`beit_mm.fileio.output_folder.OutputFolder`).
- The checkpoint (a file, a work dir's last checkpoint, or a URL) is checked against the config's model before the
  runner is built: another model's checkpoint, non-float or NaN/inf weights, or a refused output is one line
  ``test.py: error: ...`` and exit code 2, instead of a random model's scores.
- ``--tta``: test ``cfg.tta_model`` wrapping ``cfg.model`` with ``cfg.tta_pipeline`` (for slide inference with unilm's
  multi-scale resizing, :func:`beit_mm.apis.testing.slide_tta_pipeline`).
- SyncBN and CPU distributed runs: as in ``tools/train.py`` (:mod:`beit_mm.engine.launch`).

``runner.test()`` logs the metrics (mIoU, mAcc, aAcc for ``IoUMetric``); a test on CPU ends with the line
``CPU: <model, threads, native bf16 or not, ATen's kernel level>`` (what the scores' run time depends on).
"""
import argparse
import os
from typing import List, Optional

from mmengine.config import DictAction


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (and evaluate) a model with beit_mm')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the dir for logs and metrics (default: work_dirs/<config stem>)')
    parser.add_argument('--out', type=str, help='directory for the predicted label maps (offline evaluation)')
    parser.add_argument('--show', action='store_true', help='show prediction results in a window')
    parser.add_argument('--show-dir', help='directory where painted images are saved')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the files an earlier run wrote into --out/--show-dir (only those; refused '
                        'otherwise)')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value pairs, e.g. test_dataloader.batch_size=1')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none', help='job launcher')
    parser.add_argument('--tta', action='store_true', help='test time augmentation (cfg.tta_model, cfg.tta_pipeline)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    import torch

    from beit_mm.fileio.names import refusal
    from beit_mm.apis.testing import RunTestRefused, run_test
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    try:
        result = run_test(**vars(args))
    except RunTestRefused as error:
        raise refusal('test.py', error) from None
    for key, (path, written) in result['written'].items():
        print(f'test.py: {len(written)} files in {path} (--{key.replace("_", "-")})')
    if os.environ.get('RANK', '0') == '0' and not torch.cuda.is_available():  # process 0 (its group is gone now)
        print(f'CPU: {describe_cpu()}')


if __name__ == '__main__':
    main()
