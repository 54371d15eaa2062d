"""The runner of one run, as ``tools/train.py`` and ``tools/test.py`` build it (:func:`beit_mm.apis.train.train`,
:func:`beit_mm.apis.testing.run_test`)."""
import itertools
import os.path as osp

from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

_RUNNERS_BUILT = itertools.count()  # runners this process has built


def build_runner(cfg: Config) -> Runner:
    """MMEngine's ``Runner.from_cfg`` (or the config's ``runner_type``), with a visualizer, logger and message hub of
    this run's own.

    Args:
        cfg: the run's config. Its visualizer's fixed ``name`` is dropped, and from the process's second runner on its
            ``experiment_name`` (default: the config file's name) gets the runner's number appended.

    Returns:
        The runner.

    MMEngine names those three instances ``<experiment name>_<start second>`` and returns an existing instance of
    that name: a second run started in the same process within the same second (a quick training, then its test)
    logged into the first run's log file and shared its message hub, and with a fixed visualizer name every later run
    drew into the first one's ``save_dir``.
    """
    if 'visualizer' in cfg:
        cfg.visualizer.pop('name', None)
    number = next(_RUNNERS_BUILT)
    if number:
        stem = osp.splitext(osp.basename(cfg.filename))[0] if cfg.filename else 'run'
        cfg.experiment_name = f'{cfg.get("experiment_name") or stem}_{number}'
    return Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
