"""``--tensorboard``: MMEngine's ``TensorboardVisBackend`` added to a config's visualizer."""
from mmengine.config import Config


def enable_tensorboard(cfg: Config) -> None:
    """Append MMEngine's ``TensorboardVisBackend`` to ``cfg.visualizer.vis_backends`` (a plain ``Visualizer`` with a
    ``LocalVisBackend`` when the config has none). Whatever the LoggerHook logs (losses, lr, validation metrics) then
    lands in ``<work_dir>/<timestamp>/vis_data/events.out.tfevents.*``."""
    if cfg.get('visualizer') is None:
        cfg.visualizer = dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')], name='visualizer')
    backends = list(cfg.visualizer.get('vis_backends') or [])
    if not any(b.get('type', '').split('.')[-1] == 'TensorboardVisBackend' for b in backends):
        backends.append(dict(type='TensorboardVisBackend'))
    cfg.visualizer.vis_backends = backends
