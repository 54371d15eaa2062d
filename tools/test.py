"""Test (and evaluate) a checkpoint (the CLI of mmseg 1.2.2's ``tools/test.py``).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out DIR] [--show] [--show-dir DIR] [--wait-time S]
                                           [--tta] [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]
    bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]

- ``--show``/``--show-dir``: turn on drawing of ``default_hooks.visualization`` (``SegVisualizationHook``);
  ``--show-dir`` sets the visualizer's ``save_dir`` (overlays under ``<show-dir>/vis_data/vis_image/``, one for every
  test image).
- ``--out DIR``: ``test_evaluator.output_dir`` and ``keep_results=True`` (prediction PNGs for offline evaluation).
- Outputs (:mod:`beit_mm.fileio.outputs`), checked before anything is built: ``--out`` and ``--show-dir`` are output
  folders (new, empty, or written by an earlier run, whose files ``--overwrite`` replaces, only those); mmseg and
  MMEngine write them into a stage (``.<name>.part`` next to the folder) whose files are moved in when the test ends,
  each file whole, with a manifest of what was written (:class:`beit_mm.fileio.output_folder.OutputFolder`). No output
  (work dir included) may be a link, an input (the config, the checkpoint), or lie in a data root of the config or in
  any folder laid out as a dataset.
- The checkpoint (a file, a work dir's last checkpoint, or a URL) is checked against the config's model before the
  runner is built, as ``tools/infer.py`` does (:func:`beit_mm.apis.inference.check_loaded_weights`): another model's
  checkpoint (missing weights that inference reads, other shapes), non-float or NaN/inf weights are refused with one
  line ``test.py: error: ...`` and exit code 2, instead of a random model's scores.
- ``--tta``: test ``cfg.tta_model`` wrapping ``cfg.model`` with ``cfg.tta_pipeline``. For slide inference (a backbone
  with a fixed window) the pipeline's ``Resize(scale_factor=r)`` steps are replaced by unilm's/mmseg 0.x multi-scale
  resizing (:func:`setr_multiscale_resizes`): image scale ``test_scale * r`` with the short side raised to the crop, so
  no window smaller than the crop reaches the backbone.
- SyncBN and CPU distributed runs: as in ``tools/train.py`` (:mod:`beit_mm.engine.launch`).

``runner.test()`` logs the metrics (mIoU, mAcc, aAcc for ``IoUMetric``).
"""
import argparse
import copy
import os
import os.path as osp
import sys
from typing import List, Optional, Sequence, Tuple

from mmcv.transforms import Resize, TestTimeAug
from mmengine.config import Config, DictAction
from mmengine.dist import is_main_process
from mmengine.registry import RUNNERS, TRANSFORMS
from mmengine.runner import Runner

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.apis.checkpoint import CheckpointMismatchError
from beit_mm.data.checks import config_data_roots
from beit_mm.engine.launch import adapt_cfg_to_launcher, destroy_process_group, init_cpu_process_group
from beit_mm.fileio import CheckpointFileError
from beit_mm.fileio.output_folder import OutputFolder
from beit_mm.fileio.outputs import OutputError, check_inputs, check_output
from beit_mm.registry import config_type_is

TOOL = 'tools/test.py'


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


def trigger_visualization_hook(cfg: Config, args: argparse.Namespace, save_dir: Optional[str] = None) -> Config:
    """Turn on ``default_hooks.visualization`` drawing for ``--show``/``--show-dir``, of every test image (interval 1,
    as mmdet's test hook draws each image: with the configs' training-time interval of 50, a 40-image test set drew
    none); the visualizer writes into ``save_dir`` (``--show-dir``'s stage)."""
    default_hooks = cfg.default_hooks
    if 'visualization' not in default_hooks:
        raise RuntimeError("--show/--show-dir need a visualization hook: add default_hooks.visualization="
                           "dict(type='SegVisualizationHook') to the config.")
    visualization_hook = default_hooks['visualization']
    visualization_hook['draw'] = True
    visualization_hook['interval'] = 1
    if args.show:
        visualization_hook['show'] = True
        visualization_hook['wait_time'] = args.wait_time
    if args.show_dir:
        if 'visualizer' not in cfg:
            raise RuntimeError("--show-dir needs a visualizer: add visualizer=dict(type='SegLocalVisualizer', "
                               "vis_backends=[dict(type='LocalVisBackend')]) to the config.")
        cfg.visualizer['save_dir'] = save_dir or args.show_dir
    return cfg


#: SETR_Resize never bounds the long side (unilm resize_transform.py lines 174-185 rescale to a short side only);
#: mmcv's Resize takes (long, short) bounds, so the long bound is one that no image reaches.
UNBOUNDED_LONG_SIDE = 2**31 - 1


def setr_multiscale_resizes(test_scale: Sequence[int], ratios: Sequence[float],
                            crop_size: Sequence[int]) -> List[dict]:
    """One ``Resize`` per ratio, as unilm's/mmseg 0.x multi-scale evaluation of BEiT resizes.

    unilm ``beit/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_640_slide_160k_ade20k_ms.py``:
    ``MultiScaleFlipAug(img_scale=(2560, 640), img_ratios=[0.5, ..., 1.75])`` gives the scales
    ``(int(2560 * r), int(640 * r))`` (mmcv 1.x ``MultiScaleFlipAug.__init__``), and ``SETR_Resize(keep_ratio=True,
    crop_size=crop_size, setr_multi_scale=True)`` (``mmcv_custom/resize_transform.py`` lines 173-188) rescales the
    image so its short side is ``max(crop_size[0], min(scale))``, with no bound on the long side (mmseg 0.x's
    ``Resize(keep_ratio=True, min_size=640)`` in ``configs/beit/upernet_beit-base_640x640_160k_ade20k_ms.py`` does the
    same). Every resized image is therefore at least as large as the crop, and slide inference only feeds whole
    crop-size windows to the backbone.

    Args:
        test_scale: (long, short) single-scale test scale, e.g. (2560, 640).
        ratios: the multi-scale ratios, e.g. (0.5, 0.75, 1.0, 1.25, 1.5, 1.75).
        crop_size: (h, w) slide-inference window.

    Returns:
        ``[dict(type='Resize', scale=(UNBOUNDED_LONG_SIDE, short), keep_ratio=True), ...]``, one per ratio.
    """
    short = min(test_scale)
    return [
        dict(type='Resize', scale=(UNBOUNDED_LONG_SIDE, max(int(crop_size[0]), int(short * r))), keep_ratio=True)
        for r in ratios
    ]


def _ratio_resizes(tta_pipeline: list) -> Tuple[list, int, List[float]]:
    """``(transforms, index, ratios)``: the ``TestTimeAug`` choice lists of ``tta_pipeline``, the index of the list of
    ``Resize(scale_factor=r)`` choices and those ratios."""
    for step in tta_pipeline:
        if config_type_is(step.get('type'), TestTimeAug, TRANSFORMS):
            for index, choices in enumerate(step['transforms']):
                if choices and all(config_type_is(t.get('type'), Resize, TRANSFORMS) and 'scale_factor' in t
                                   for t in choices):
                    return step['transforms'], index, [float(t['scale_factor']) for t in choices]
    raise RuntimeError('--tta with slide inference needs a TestTimeAug step whose first choice list is '
                       "[dict(type='Resize', scale_factor=r, keep_ratio=True) for r in ratios] (as mmseg's "
                       'configs/_base_/datasets/ade20k_640x640.py); the ratios are resized as unilm does '
                       '(short side >= crop)')


def slide_tta_pipeline(cfg: Config) -> list:
    """``cfg.tta_pipeline`` with its ratio resizes replaced by :func:`setr_multiscale_resizes` for slide inference.

    The test scale is the ``Resize.scale`` of ``cfg.test_pipeline`` and the crop is ``cfg.model.test_cfg.crop_size``.
    Configs that do not test with ``mode='slide'`` get ``cfg.tta_pipeline`` unchanged.
    """
    pipeline = copy.deepcopy(cfg.tta_pipeline)
    test_cfg = cfg.model.get('test_cfg') or {}
    if test_cfg.get('mode') != 'slide':
        return pipeline
    resizes = [t for t in cfg.test_pipeline if config_type_is(t.get('type'), Resize, TRANSFORMS) and 'scale' in t]
    if len(resizes) != 1:
        raise RuntimeError('--tta with slide inference needs exactly one Resize(scale=...) in cfg.test_pipeline (the '
                           f'single-scale test scale, e.g. (2560, 640)); found {len(resizes)}')
    transforms, index, ratios = _ratio_resizes(pipeline)
    transforms[index] = setr_multiscale_resizes(resizes[0]['scale'], ratios, test_cfg['crop_size'])
    return pipeline


def checkpoint_path(checkpoint: str) -> str:
    """The checkpoint file to test: a file, a work dir's last checkpoint (:func:`beit_mm.apis.resolve_checkpoint`),
    or a remote name as given."""
    from beit_mm.apis import resolve_checkpoint
    from beit_mm.fileio.remote import is_remote
    return checkpoint if is_remote(checkpoint) else resolve_checkpoint(checkpoint)


def check_checkpoint(cfg: Config, config: str, path: str) -> None:
    """Refuse a checkpoint that does not fit ``cfg``'s model for inference, as ``tools/infer.py`` does
    (:func:`beit_mm.apis.inference.check_loaded_weights`: no other shapes, no non-float or non-finite weights, every
    weight inference reads present). A remote file is opened through :mod:`beit_mm.fileio.remote` (cached)."""
    from mmengine.runner import CheckpointLoader

    from beit_mm.apis.inference import build_from_config, check_loaded_weights, inference_weights
    from beit_mm.fileio import load_state_dict_file, unwrap_state_dict
    from beit_mm.fileio.remote import is_remote
    state_dict = (unwrap_state_dict(CheckpointLoader.load_checkpoint(path, map_location='cpu')) if is_remote(path)
                  else load_state_dict_file(path))
    model = build_from_config(cfg)
    check_loaded_weights(model, path, inference_weights(cfg), f'{path} (with config {config})', state_dict)


def output_folders(cfg: Config, args: argparse.Namespace, checkpoint: str) -> dict:
    """Check every output before anything is built (:mod:`beit_mm.fileio.outputs`); ``{'out': OutputFolder,
    'show_dir': OutputFolder}`` for the options given."""
    inputs = [args.config, checkpoint, *config_data_roots(cfg)]
    check_output(cfg.work_dir, overwrite=True, kind='dir', inputs=inputs)
    if args.out and args.show_dir:
        try:  # each is the other's input: neither may be, hold or lie in the other
            check_inputs(args.out, [args.show_dir], kind='folder')
            check_inputs(args.show_dir, [args.out], kind='folder')
        except OutputError:
            raise OutputError(f'--out {args.out} and --show-dir {args.show_dir} overlap; nothing was written. Fix: '
                              'give two separate folders') from None
    return {key: OutputFolder(getattr(args, key), TOOL, args.overwrite, inputs=inputs, staged=True)
            for key in ('out', 'show_dir') if getattr(args, key)}


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    try:  # outputs and the checkpoint: named errors before anything is built or written
        cfg.load_from = checkpoint_path(args.checkpoint)
        folders = output_folders(cfg, args, cfg.load_from)
        check_checkpoint(cfg, args.config, cfg.load_from)
    except (OutputError, CheckpointFileError, CheckpointMismatchError, FileNotFoundError) as error:
        print(f'test.py: error: {error}', file=sys.stderr)
        raise SystemExit(2) from None
    if args.show or args.show_dir:
        cfg = trigger_visualization_hook(cfg, args, folders['show_dir'].stage if args.show_dir else None)
    if args.tta:
        if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
            raise RuntimeError('--tta needs cfg.tta_model and cfg.tta_pipeline in the config (see mmseg\'s '
                               "configs/_base_/datasets/ade20k.py: tta_model=dict(type='SegTTAModel')).")
        cfg.test_dataloader.dataset.pipeline = slide_tta_pipeline(cfg)
        cfg.tta_model.module = cfg.model
        cfg.model = cfg.tta_model
    if args.out is not None:
        cfg.test_evaluator['output_dir'] = folders['out'].stage
        cfg.test_evaluator['keep_results'] = True
    adapt_cfg_to_launcher(cfg, args.launcher)
    init_cpu_process_group(args.launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    try:
        runner.test()
    except BaseException:
        if is_main_process():
            for folder in folders.values():
                folder.discard()  # nothing of a failed run goes into the output folders
        raise
    if is_main_process():
        for key, folder in folders.items():
            written = folder.commit()
            print(f'test.py: {len(written)} files in {folder.path} (--{key.replace("_", "-")})')
    del runner  # it holds the DDP wrapper, which holds the process group: free both first (beit_mm.engine.launch)
    destroy_process_group()


if __name__ == '__main__':
    main()
