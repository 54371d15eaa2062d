"""Checkpoints named by a URL or an MMEngine prefix: fetched to a local file, then opened like one.

MMEngine's own remote loaders unpickle fully, so :func:`register_mmengine_loaders` replaces the loader of every
prefix MMEngine knows: URLs go to the torch hub cache, named prefixes resolve to their URL, ``s3://``/``petrel://`` go
through MMEngine's file backend, each then opened with :func:`.checkpoint.open_checkpoint`; other prefixes are refused.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import os.path as osp
import re
import sys
from urllib.parse import urlparse

import torch

from .checkpoint import CheckpointFileError, open_checkpoint

URL_PREFIXES = ('http://', 'https://')


def hub_cache_path(url: str) -> str:
    """Where a download of ``url`` lies: ``<torch hub dir>/checkpoints/<file name of the URL>`` (as
    ``torch.hub.load_state_dict_from_url`` puts it)."""
    name = osp.basename(urlparse(url).path)
    if not name or name in ('.', '..'):
        raise CheckpointFileError(f'{url} names no file (its path ends in "/"). Fix: give the URL of the .pth file')
    return osp.join(torch.hub.get_dir(), 'checkpoints', name)


def fetch_url(url: str, progress: bool = False) -> str:
    """The local copy of ``url``: the hub cache's file when it is there, else downloaded to it (torch writes a
    temporary file and renames it when complete). In a distributed run rank 0 downloads and the others wait."""
    from mmengine.dist import barrier, get_dist_info
    path = hub_cache_path(url)
    rank, world_size = get_dist_info()
    if rank == 0 and not osp.isfile(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
        try:
            torch.hub.download_url_to_file(url, path, progress=progress)
        except OSError as error:
            raise CheckpointFileError(f'cannot download {url} ({error}). Fix: check the URL and the network, or '
                                      f'download the file yourself and pass its local path') from None
    if world_size > 1:
        barrier()
    return path


def open_url(url: str, map_location='cpu'):
    """Fetch ``url`` (:func:`fetch_url`) and open the file safely (:func:`.checkpoint.open_checkpoint`)."""
    return open_checkpoint(fetch_url(url), map_location=map_location)


def _from_table(filename: str, prefixes: tuple[str, ...], table: dict, deprecated: dict | None = None) -> str:
    prefix = next(p for p in prefixes if filename.startswith(p))
    name = filename[len(prefix):]
    name = (deprecated or {}).get(name, name)
    if name not in table:
        raise CheckpointFileError(f'{filename}: MMEngine knows no model {name!r} under {prefix}. Fix: check the name '
                                  'or pass the checkpoint\'s URL or local path')
    return table[name]


def load_from_torchvision(filename: str, map_location=None):
    from mmengine.runner.checkpoint import get_torchvision_models
    return open_url(_from_table(filename, ('modelzoo://', 'torchvision://'), get_torchvision_models()), map_location)


def load_from_openmmlab(filename: str, map_location=None):
    from mmengine.runner.checkpoint import _get_mmengine_home, get_deprecated_model_names, get_external_models
    target = _from_table(filename, ('open-mmlab://', 'openmmlab://'), get_external_models(),
                         get_deprecated_model_names())
    if target.startswith(URL_PREFIXES):
        return open_url(target, map_location)
    return open_checkpoint(osp.join(_get_mmengine_home(), target), map_location=map_location)


def load_from_mmcls(filename: str, map_location=None):
    from mmengine.runner.checkpoint import _process_mmcls_checkpoint, get_mmcls_models
    return _process_mmcls_checkpoint(open_url(_from_table(filename, ('mmcls://', ), get_mmcls_models()),
                                              map_location))


def load_from_http(filename: str, map_location=None):
    return open_url(filename, map_location)


def load_from_ceph(filename: str, map_location=None):
    """``s3://``/``petrel://`` (MMEngine's petrel backend): the bytes into the hub cache, then opened as a file."""
    from mmengine.fileio import get_file_backend

    from .outputs import atomic_write_bytes
    digest = hashlib.sha256(filename.encode()).hexdigest()[:16]
    path = osp.join(torch.hub.get_dir(), 'checkpoints', f'{digest}-{osp.basename(filename)}')
    if not osp.isfile(path):
        atomic_write_bytes(get_file_backend(filename, backend_args={'backend': 'petrel'}).get(filename), path)
    return open_checkpoint(path, map_location=map_location)


def load_from_unsupported(filename: str, map_location=None):
    raise CheckpointFileError(f'{filename}: beit_mm opens checkpoints from local paths, http(s):// URLs and '
                              'MMEngine\'s torchvision://, open-mmlab://, mmcls://, s3:// names only, so that no '
                              'loader unpickles a file beyond tensors. Fix: download the file and pass its local path')


def load_from_local(filename: str, map_location=None):
    return open_checkpoint(osp.expanduser(filename), map_location=map_location)


# prefix (as MMEngine registers it) -> beit_mm's loader (named load_from_<what> as MMEngine's, whose log line prints
# the name after 'load_from_')
LOADERS = {
    '': load_from_local,
    'http://': load_from_http,
    'https://': load_from_http,
    'modelzoo://': load_from_torchvision,
    'torchvision://': load_from_torchvision,
    'open-mmlab://': load_from_openmmlab,
    'openmmlab://': load_from_openmmlab,
    'mmcls://': load_from_mmcls,
    r'(\S+\:)?s3://': load_from_ceph,
    r'(\S+\:)?petrel://': load_from_ceph,
}


def is_remote(filename: str) -> bool:
    """Whether a checkpoint name goes to a remote loader (any prefix ``scheme://``)."""
    return re.match(r'^[\w.+-]*(:[\w.+-]*)?://', str(filename)) is not None


def register_mmengine_loaders() -> None:
    """Make every prefix of MMEngine's ``CheckpointLoader`` open through this module (idempotent): :data:`LOADERS`
    for the known ones, :func:`load_from_unsupported` for any other. Deferred until ``mmengine.runner.checkpoint``
    has run, so importing beit_mm does not import MMEngine's runner."""
    if CHECKPOINT_MODULE not in sys.modules:
        if not any(isinstance(finder, _AfterCheckpointModule) for finder in sys.meta_path):
            sys.meta_path.insert(0, _AfterCheckpointModule())
        return
    from mmengine.runner.checkpoint import CheckpointLoader
    known = set(CheckpointLoader._schemes) | set(LOADERS)
    for prefix in known:
        CheckpointLoader.register_scheme(prefixes=prefix, loader=LOADERS.get(prefix, load_from_unsupported), force=True)


CHECKPOINT_MODULE = 'mmengine.runner.checkpoint'


class _AfterCheckpointModule(importlib.abc.MetaPathFinder):
    """Finds ``mmengine.runner.checkpoint`` as the other finders do, and runs :func:`register_mmengine_loaders` once
    the module has been executed."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != CHECKPOINT_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        run = spec.loader.exec_module

        def run_then_register(module):
            run(module)
            register_mmengine_loaders()

        spec.loader.exec_module = run_then_register
        return spec
