"""The runner of one run: built with its own visualizer, logger and message hub, its data loader workers ended."""
import itertools
import os.path as osp

from mmengine.config import Config
from mmengine.dist import master_only
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

_RUNNERS_BUILT = itertools.count()


@master_only
def _dump_config_in_log_dir(runner: Runner) -> None:
    """``Runner.dump_config`` into the run's log dir: ``<work_dir>/<timestamp>/<config file name>`` (process 0)."""
    name = osp.basename(runner.cfg.filename) if runner.cfg.filename is not None else f'{runner.timestamp}.py'
    runner.cfg.dump(osp.join(runner.log_dir, name))


def build_runner(cfg: Config, config_dump_in_log_dir: bool = False) -> Runner:
    """MMEngine's ``Runner.from_cfg`` (or the config's ``runner_type``), with a visualizer, logger and message hub of
    this run's own.

    Args:
        cfg: the run's config; the visualizer's fixed ``name`` is dropped and a second runner's ``experiment_name``
            numbered.
        config_dump_in_log_dir: dump the config into the run's log dir instead of the work dir.

    Raises:
        KeyError: the config's ``runner_type`` is not a registered runner.
        HandoverError: a key a pipeline hands to the data preprocessor is not packed.

    MMEngine reuses instances named ``<experiment name>_<start second>``, so two runs in one second would share them.
    """
    from beit_mm.data.checks.handover import check_handover
    check_handover(cfg)
    if 'visualizer' in cfg:
        cfg.visualizer.pop('name', None)
    number = next(_RUNNERS_BUILT)
    if number:
        stem = osp.splitext(osp.basename(cfg.filename))[0] if cfg.filename else 'run'
        cfg.experiment_name = f'{cfg.get("experiment_name") or stem}_{number}'
    if not config_dump_in_log_dir:
        return Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    base = cfg.get('runner_type', Runner)
    runner_class = RUNNERS.get(base) if isinstance(base, str) else base
    if runner_class is None:
        raise KeyError(f'runner_type={base!r} is not a registered runner')
    return type(runner_class.__name__, (runner_class, ), {'dump_config': _dump_config_in_log_dir}).from_cfg(cfg)


def release_dataloader_workers(runner: Runner) -> None:
    """Stop the worker processes of the runner's train, validation and test data loaders.

    Persistent workers outlive the run, and their later collection stalls the next run of the process for seconds.
    """
    for name in ('_train_loop', '_val_loop', '_test_loop'):
        loader = getattr(getattr(runner, name, None), 'dataloader', None)
        iterator = getattr(loader, '_iterator', None)
        if iterator is not None and hasattr(iterator, '_shutdown_workers'):
            iterator._shutdown_workers()
            loader._iterator = None
