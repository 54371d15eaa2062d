"""Testing a checkpoint with a config (:func:`run_test`).

Outputs are checked before anything is built and written through :class:`beit_mm.fileio.output_folder.OutputFolder`;
the checkpoint is checked against the config's model first, so another model's weights are refused, not scored.
``tta`` with slide inference resizes as unilm does (short side raised to the crop). No function is named ``test*``,
so a test module importing one does not collect it.
"""
from __future__ import annotations

import copy
import logging
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple

from mmcv.transforms import Resize, TestTimeAug
from mmengine.config import Config
from mmengine.dist import get_world_size, is_main_process
from mmengine.logging import print_log
from mmengine.registry import TRANSFORMS

from ..data.checks import DatasetCheckError, check_evaluator_files, config_data_roots
from ..engine.runner import build_runner, release_dataloader_workers
from ..engine.launch import adapt_cfg_to_launcher, destroy_process_group, init_cpu_process_group
from ..fileio import CheckpointFileError
from ..fileio.output_folder import OutputFolder
from ..fileio.outputs import OutputError, check_inputs, check_output
from ..registry import config_type_is
from ..models.builder import CheckpointMismatchError

TOOL = 'tools/test.py'


class RunTestRefused(Exception):
    """An output, the checkpoint or the config refused before anything is built or written; the message names the
    problem and the fix."""


def trigger_visualization_hook(cfg: Config, show: bool = False, show_dir: Optional[str] = None,
                               wait_time: float = 2, save_dir: Optional[str] = None) -> Config:
    """Turn on ``default_hooks.visualization`` drawing of every test image (interval 1) for ``show``/``show_dir``;
    the visualizer writes into ``save_dir`` (``show_dir``'s stage).

    Raises:
        RuntimeError: the config has no visualization hook or, for ``show_dir``, no visualizer.
    """
    default_hooks = cfg.default_hooks
    if 'visualization' not in default_hooks:
        raise RuntimeError("--show/--show-dir need a visualization hook: add default_hooks.visualization="
                           "dict(type='SegVisualizationHook') to the config.")
    visualization_hook = default_hooks['visualization']
    visualization_hook['draw'] = True
    visualization_hook['interval'] = 1
    if show:
        visualization_hook['show'] = True
        visualization_hook['wait_time'] = wait_time
    if show_dir:
        if 'visualizer' not in cfg:
            raise RuntimeError("--show-dir needs a visualizer: add visualizer=dict(type='SegLocalVisualizer', "
                               "vis_backends=[dict(type='LocalVisBackend')]) to the config.")
        cfg.visualizer['save_dir'] = save_dir or show_dir
    return cfg


#: A long-side bound no image reaches: unilm's SETR_Resize bounds the short side only.
UNBOUNDED_LONG_SIDE = 2**31 - 1


def setr_multiscale_resizes(test_scale: Sequence[int], ratios: Sequence[float],
                            crop_size: Sequence[int]) -> List[dict]:
    """One ``Resize`` per ratio, as unilm's multi-scale evaluation of BEiT: short side ``max(crop, short * r)``,
    long side unbounded (unilm ``mmcv_custom/resize_transform.py:173-188``, ``SETR_Resize``), so slide inference feeds
    only whole crop-size windows to the backbone.

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
    """``(choice lists of the TestTimeAug step, index of the Resize(scale_factor=r) list, the ratios)``."""
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
    """``cfg.tta_pipeline``, its ratio resizes replaced by :func:`setr_multiscale_resizes` under slide inference
    (test scale from ``cfg.test_pipeline``, crop from ``cfg.model.test_cfg``); unchanged otherwise."""
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


def apply_tta(cfg: Config) -> Config:
    """``cfg`` testing ``cfg.tta_model`` around ``cfg.model`` with :func:`slide_tta_pipeline` as the test pipeline."""
    if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
        raise RuntimeError('--tta needs cfg.tta_model and cfg.tta_pipeline in the config (see mmseg\'s '
                           "configs/_base_/datasets/ade20k.py: tta_model=dict(type='SegTTAModel')).")
    cfg.test_dataloader.dataset.pipeline = slide_tta_pipeline(cfg)
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model
    return cfg


def checkpoint_path(checkpoint: str) -> str:
    """The checkpoint file to test: a file, a work dir's last checkpoint, or a remote name as given."""
    from ..fileio.remote import is_remote
    from ..models.builder import resolve_checkpoint
    return checkpoint if is_remote(checkpoint) else resolve_checkpoint(checkpoint)


def check_checkpoint(cfg: Config, config: str, path: str) -> None:
    """Refuse a checkpoint that does not fit ``cfg``'s model for inference: other shapes, non-float or non-finite
    weights, or a weight inference reads missing."""
    from mmengine.runner import CheckpointLoader

    from ..fileio import load_state_dict_file, unwrap_state_dict
    from ..fileio.remote import is_remote
    from ..models.builder import build_from_config, check_loaded_weights, inference_weights
    state_dict = (unwrap_state_dict(CheckpointLoader.load_checkpoint(path, map_location='cpu')) if is_remote(path)
                  else load_state_dict_file(path))
    model = build_from_config(cfg)
    check_loaded_weights(model, path, inference_weights(cfg), f'{path} (with config {config})', state_dict)


def output_folders(cfg: Config, config: str, checkpoint: str, out: Optional[str] = None,
                   show_dir: Optional[str] = None, overwrite: bool = False) -> dict:
    """Check every output before anything is built; ``{'out' | 'show_dir': OutputFolder}`` for the options given."""
    inputs = [config, checkpoint, *config_data_roots(cfg)]
    check_output(cfg.work_dir, overwrite=True, kind='dir', inputs=inputs)
    if out and show_dir:
        try:  # each is the other's input: neither may be, hold or lie in the other
            check_inputs(out, [show_dir], kind='folder')
            check_inputs(show_dir, [out], kind='folder')
        except OutputError:
            raise OutputError(f'--out {out} and --show-dir {show_dir} overlap; nothing was written. Fix: '
                              'give two separate folders') from None
    return {key: OutputFolder(path, TOOL, overwrite, inputs=inputs, staged=True)
            for key, path in (('out', out), ('show_dir', show_dir)) if path}


def run_test(config: str, checkpoint: str, *, work_dir: Optional[str] = None, out: Optional[str] = None,
             show: bool = False, show_dir: Optional[str] = None, overwrite: bool = False, wait_time: float = 2,
             cfg_options: Optional[dict] = None, launcher: str = 'none', tta: bool = False,
             local_rank: int = 0) -> dict:
    """Test ``checkpoint`` with ``config`` (``runner.test()``) in the calling process; the keywords are the test
    entry point's flags.

    Returns:
        ``{'metrics': the runner's metrics, 'written': {'out' | 'show_dir': (folder, [files written])}}`` (``written``
        empty on ranks other than the main one).

    Raises:
        RunTestRefused: an output, the checkpoint or its fit to the config's model refused, or a file the test
            evaluator reads lies outside the test dataset's root.
        RuntimeError: ``show``/``show_dir``/``tta`` without what they need in the config.
    """
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(local_rank)
    cfg = Config.fromfile(config)
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config))[0])
    try:
        cfg.load_from = checkpoint_path(checkpoint)
        folders = output_folders(cfg, config, cfg.load_from, out, show_dir, overwrite)
        check_checkpoint(cfg, config, cfg.load_from)
        check_evaluator_files(cfg, ['test_dataloader'])
    except (OutputError, CheckpointFileError, CheckpointMismatchError, FileNotFoundError, DatasetCheckError) as error:
        raise RunTestRefused(str(error)) from error
    if show or show_dir:
        cfg = trigger_visualization_hook(cfg, show, show_dir, wait_time,
                                         folders['show_dir'].stage if show_dir else None)
    if tta:
        cfg = apply_tta(cfg)
    if out is not None:
        cfg.test_evaluator['output_dir'] = folders['out'].stage
        cfg.test_evaluator['keep_results'] = True
    adapt_cfg_to_launcher(cfg, launcher)
    init_cpu_process_group(launcher, cfg.get('env_cfg', {}).get('dist_cfg', {}))

    runner = build_runner(cfg, config_dump_in_log_dir=True)
    if (show or show_dir) and get_world_size() > 1 and is_main_process():
        print_log(f'drawing on {get_world_size()} processes: MMEngine\'s visualizer draws on process 0 only, so the '
                  f'pictures are of its share of the test images (about 1 in {get_world_size()}); test in one '
                  'process to draw every image', logger='current', level=logging.WARNING)
    try:
        metrics = runner.test()
    except BaseException:
        if is_main_process():
            for folder in folders.values():
                folder.discard()  # nothing of a failed run goes into the output folders
        raise
    finally:
        release_dataloader_workers(runner)
    written = {key: (folder.path, folder.commit()) for key, folder in folders.items()} if is_main_process() else {}
    del runner  # it holds the DDP wrapper, which holds the process group
    destroy_process_group()
    return {'metrics': metrics, 'written': written}
