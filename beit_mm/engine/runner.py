"""The runner of one run, as ``tools/train.py`` and ``tools/test.py`` build it (:func:`beit_mm.apis.train.train`,
:func:`beit_mm.apis.testing.run_test`)."""
from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner


def build_runner(cfg: Config) -> Runner:
    """MMEngine's ``Runner.from_cfg`` (or the config's ``runner_type``), with a visualizer of this run's own: the
    config's fixed ``name`` is dropped, so MMEngine names it after the run. With a fixed name (default_runtime's
    ``'visualizer'``) a second run in the same process got the first run's instance, whose ``save_dir`` may be gone."""
    if 'visualizer' in cfg:
        cfg.visualizer.pop('name', None)
    return Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
