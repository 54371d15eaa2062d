"""A demo config shortened for a test: its data at ``data_root``, no workers, batch 2, ``iters`` iterations with a
validation and a checkpoint at the end, no lr schedule."""
from mmengine.config import Config


def short_demo(config: str, data_root: str, work_dir, iters: int) -> Config:
    cfg = Config.fromfile(config)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = data_root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    cfg.train_dataloader.batch_size = 2
    cfg.train_cfg.max_iters = cfg.train_cfg.val_interval = iters
    cfg.param_scheduler = []
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = iters
    cfg.work_dir = str(work_dir)
    return cfg
