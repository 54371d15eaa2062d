"""Build a config's model for analysis (pictures, FLOPs, inference): no pretrained files read, checkpoints checked.

- :func:`drop_pretrained_init`: remove every ``init_cfg=dict(type='Pretrained', ...)`` from a model config, so the
  model builds without the official files it would otherwise load (their weights come from a checkpoint, or random
  weights are enough, as for counting FLOPs).
- :func:`resolve_checkpoint`: a ``.pth`` file, or a ``tools/train.py`` work dir (its ``last_checkpoint``).
- :func:`build_from_config` / :func:`load_model`: the config's model, random or from a training checkpoint.
"""
from __future__ import annotations

import os.path as osp

from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch import nn

from ..converters.io import load_state_dict_file


def drop_pretrained_init(node) -> None:
    """Set every ``init_cfg`` of type ``Pretrained`` under ``node`` (a config dict/list) to None, in place."""
    if isinstance(node, dict):
        init_cfg = node.get('init_cfg')
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            node['init_cfg'] = None
        for value in node.values():
            drop_pretrained_init(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            drop_pretrained_init(value)


def resolve_checkpoint(path: str) -> str:
    """A checkpoint file as given, or the last checkpoint of a work dir (its ``last_checkpoint`` file)."""
    from mmengine.runner import find_latest_checkpoint
    if osp.isdir(path):
        latest = find_latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f'{path} is a folder without a last_checkpoint file; pass a .pth file or the work '
                                    'dir of a tools/train.py run')
        return latest
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint {path} does not exist; pass a .pth file or a work dir')
    return path


def build_from_config(cfg: Config, drop_auxiliary_head: bool = False) -> nn.Module:
    """The config's model with random (its own init) weights and no ``Pretrained`` file read, in eval mode, SyncBN
    reverted to BN (one process)."""
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import MODELS
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    model_cfg = cfg.model.to_dict() if hasattr(cfg.model, 'to_dict') else dict(cfg.model)
    drop_pretrained_init(model_cfg)
    if drop_auxiliary_head and model_cfg.get('auxiliary_head') is not None:
        model_cfg['auxiliary_head'] = None
    model = MODELS.build(model_cfg)
    model.init_weights()
    return revert_sync_batchnorm(model).eval()


def load_model(config: str, checkpoint: str, need: tuple[str, ...] = ('backbone.', )) -> tuple[nn.Module, Config]:
    """Build ``config``'s model and load a training checkpoint (file or work dir) into it.

    Every weight whose name starts with one of ``need`` must be in the checkpoint (KeyError otherwise).
    Returns the model in eval mode and the config.
    """
    cfg = Config.fromfile(config)
    model = build_from_config(cfg)
    path = resolve_checkpoint(checkpoint)
    result = model.load_state_dict(load_state_dict_file(path), strict=False)
    missing = [k for k in result.missing_keys if k.startswith(need)]
    if missing:
        raise KeyError(f'{path} lacks {len(missing)} weights of {config} ({", ".join(missing[:3])}, ...); pass a '
                       'checkpoint that tools/train.py wrote with this config')
    return model.eval(), cfg
