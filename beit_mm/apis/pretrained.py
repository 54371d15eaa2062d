"""The starting weights a config names: present before a run starts, or a named error saying where they come from
(the official file, where it is published and the converter command, read from the ``metafile.yml`` beside the
config).
"""
from __future__ import annotations

import glob
import os.path as osp
from collections.abc import Iterator, Mapping

import yaml

from ..fileio.remote import is_remote
from ..fileio.text_file import TextFileError, read_bounded

METAFILE = 'metafile.yml'
MAX_METAFILE_BYTES = 4 * 2**20


class MissingPretrainedError(FileNotFoundError):
    """Starting weights a config names do not exist; the message says where they come from."""


def pretrained_paths(cfg: Mapping) -> list[tuple[str, str]]:
    """The local starting-weight files a config names, as ``(where in the config, path)``: every
    ``init_cfg=dict(type='Pretrained', checkpoint=...)`` under ``cfg.model`` and ``load_from``. Remote names (URLs,
    MMEngine prefixes) are left to the loaders that fetch them."""
    found = [(where, path) for where, path in _init_checkpoints(cfg.get('model'), 'model')]
    if cfg.get('load_from') and not cfg.get('resume'):
        found.append(('load_from', cfg['load_from']))
    return [(where, path) for where, path in found if isinstance(path, str) and not is_remote(path)]


def _init_checkpoints(node, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, Mapping):
        init_cfg = node.get('init_cfg')
        for cfg in init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]:
            if isinstance(cfg, Mapping) and cfg.get('type') == 'Pretrained' and cfg.get('checkpoint'):
                yield f'{where}.init_cfg.checkpoint', cfg['checkpoint']
        for key, value in node.items():
            if key != 'init_cfg':
                yield from _init_checkpoints(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _init_checkpoints(value, f'{where}[{i}]')


def conversion_sources(config_file: str) -> dict[str, dict]:
    """``{converted path: Converted From}`` of the model index entries in the ``metafile.yml`` beside
    ``config_file`` (the last word of each entry's ``Command`` is the file it writes); empty without a metafile."""
    metafile = osp.join(osp.dirname(osp.abspath(config_file)), METAFILE)
    if not osp.isfile(metafile):
        return {}
    index = yaml.safe_load(read_bounded(metafile, MAX_METAFILE_BYTES, TextFileError, 'model index'))
    sources = {}
    for model in (index or {}).get('Models') or []:
        source = model.get('Converted From') or {}
        command = str(source.get('Command') or '')
        if command.startswith('python tools/convert_checkpoint.py'):
            sources.setdefault(osp.normpath(command.split()[-1]), source)
    return sources


def check_pretrained_files(cfg: Mapping, config_file: str) -> None:
    """Raise :class:`MissingPretrainedError` naming every starting-weight file of ``cfg`` that does not exist, each
    with its official source and converter command where the config's model index has them.

    Args:
        cfg: the run's config (after ``--cfg-options``).
        config_file: the config's path (its ``metafile.yml`` is looked up beside it).
    """
    missing = [(where, path) for where, path in pretrained_paths(cfg) if not osp.isfile(path)]
    if not missing:
        return
    sources = conversion_sources(config_file)
    lines = []
    for where, path in missing:
        source = sources.get(osp.normpath(path))
        if source is None:
            fix = ('no model index entry beside the config names its source: make it as the config\'s header says '
                   '(a study config names the run that writes it), convert an official file with '
                   f'tools/convert_checkpoint.py (docs/checkpoints.md lists the sources), or point {where} at your '
                   'own file')
        else:
            fix = (f"it is converted from {source.get('Weights')}, published at {source.get('Code')}; once "
                   f"downloaded, run: {source['Command']}")
        lines.append(f'{where} = {path} does not exist (working directory {osp.abspath(".")}): {fix}')
    raise MissingPretrainedError(f'{len(missing)} starting-weight file(s) of {config_file} are missing; nothing was '
                                 'built. ' + ' | '.join(lines))


def shipped_config_dir() -> str:
    """``configs/`` beside the package (the checkout or the source distribution)."""
    return osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs')


def official_sources(name: str, config_dir: str | None = None) -> list[dict]:
    """The ``Converted From`` entries of every shipped ``metafile.yml`` whose converter command reads a file named
    ``name`` (its base name: the official file a user downloads), without repeats."""
    found = []
    for metafile in sorted(glob.glob(osp.join(config_dir or shipped_config_dir(), '*', METAFILE))):
        for source in conversion_sources(metafile).values():
            words = str(source.get('Command') or '').split()
            if len(words) >= 2 and osp.basename(words[-2]) == osp.basename(name) and source not in found:
                found.append(source)
    return found


def missing_official_file(path: str) -> str | None:
    """For a missing converter input that a shipped model index names: where it is published and the exact
    converter command(s); None for a file no index names."""
    sources = official_sources(path)
    if not sources:
        return None
    where = ', '.join(dict.fromkeys(str(s.get('Code')) for s in sources))
    commands = ' | '.join(dict.fromkeys(str(s['Command']) for s in sources))
    return (f'{path} does not exist (working directory {osp.abspath(".")}). It is an official file '
            f'({sources[0].get("Weights")}), published at {where}. Fix: download it, then run: {commands}')
