"""Checks of a config's data folders before any dataset is built: the roots it reads, a demo root it does not read,
split folders that are missing or empty, split files and class names, files an evaluator reads outside its
dataset's root."""
from __future__ import annotations

import logging
import os
import os.path as osp
from collections.abc import Mapping, Sequence

from mmengine.logging import print_log

from ...fileio.names import check_name, shown
from ...fileio.text_file import check_name_list
from .labels import DatasetCheckError
from .splits import suffix_text, suffixes


def dataset_configs(node) -> list:
    """The leaf dataset configs of a dataloader's ``dataset`` (inside ``dataset=`` / ``datasets=`` wrappers)."""
    if 'datasets' in node:
        return [leaf for d in node['datasets'] for leaf in dataset_configs(d)]
    if 'dataset' in node:
        return dataset_configs(node['dataset'])
    return [node]


def config_data_roots(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader', 'test_dataloader')
                      ) -> list[str]:
    """The folders a config's datasets read: every leaf dataset's ``data_root`` and its ``data_prefix`` folders."""
    found = []
    for loader in loaders:
        dataloader = cfg.get(loader)
        if not dataloader or not dataloader.get('dataset'):
            continue
        for ds in dataset_configs(dataloader['dataset']):
            root = ds.get('data_root') or ''
            prefix = ds.get('data_prefix') or {}  # mmseg: dict(img_path=..., seg_map_path=...); mmpretrain: a str
            prefixes = [p for p in ([prefix] if isinstance(prefix, str) else prefix.values())
                        if isinstance(p, str) and p]
            for folder in ([root] if root else []) + [osp.join(root, p) for p in prefixes]:
                if folder not in found:
                    found.append(folder)
    return found


def _default_argument(dataset_type: str, name: str, scope: str | None):
    import inspect

    from mmengine.registry import DATASETS
    with DATASETS.switch_scope_and_registry(scope) as registry:
        cls = registry.get(dataset_type)
    parameter = inspect.signature(cls.__init__).parameters.get(name) if cls is not None else None
    return None if parameter is None else parameter.default


def _has_file(directory: str, suffix: tuple[str, ...]) -> bool:
    for _, _, files in os.walk(directory):
        if any(name.endswith(suffix) for name in files):
            return True
    return False


def warn_unread_data_root(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader')) -> str | None:
    """Log and return a warning when the config's top-level ``data_root`` is read by none of the ``loaders``'
    datasets (an override after the datasets copied it)."""
    top = cfg.get('data_root')
    roots = sorted({str(ds.get('data_root')) for loader in loaders if (cfg.get(loader) or {}).get('dataset')
                    for ds in dataset_configs(cfg[loader]['dataset']) if ds.get('data_root')})
    if not isinstance(top, str) or not roots or top in roots:
        return None
    options = ' '.join(f'{name}.dataset.data_root={top}' for name in ('train_dataloader', 'val_dataloader',
                                                                      'test_dataloader'))
    message = (f"the config's data_root={top!r} is read by none of its datasets, which read {roots}: "
               '--cfg-options data_root=... only sets that variable, after the config copied it into the datasets. '
               f'Fix: set the datasets\' roots, --cfg-options {options}')
    print_log(message, logger='current', level=logging.WARNING)
    return message


#: The arguments of mmdet's metrics that name a file or folder the metric reads its ground truth from (``CocoMetric``,
#: ``LVISMetric``: ``ann_file``; ``CocoPanopticMetric``: ``ann_file`` and ``seg_prefix``; ``CityScapesMetric``:
#: ``seg_prefix``); the other metrics of mmdet, mmseg and mmpretrain, and beit_mm's, read the data samples.
EVALUATOR_INPUTS = ('ann_file', 'seg_prefix')
#: The loader whose dataset each evaluator scores.
EVALUATED_LOADERS = {'val_dataloader': 'val_evaluator', 'test_dataloader': 'test_evaluator'}


def evaluator_metrics(evaluator, key: str) -> list[tuple[str, Mapping]]:
    """``(the metric's --cfg-options key, its config)`` of every metric of an evaluator config: one metric, a list of
    them, or MMEngine's ``dict(type='Evaluator', metrics=...)``."""
    if isinstance(evaluator, Mapping) and 'metrics' in evaluator:
        return evaluator_metrics(evaluator['metrics'], f'{key}.metrics')
    if isinstance(evaluator, Mapping):
        return [(key, evaluator)]
    if isinstance(evaluator, Sequence) and not isinstance(evaluator, str):
        return [(f'{key}.{i}', metric) for i, metric in enumerate(evaluator) if isinstance(metric, Mapping)]
    return []


def _inside(path: str, folder: str) -> bool:
    path, folder = osp.abspath(path), osp.abspath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_evaluator_files(cfg, loaders: Sequence[str] = ('val_dataloader', 'test_dataloader')) -> None:
    """Every file an evaluator of ``loaders`` reads (:data:`EVALUATOR_INPUTS`) lies under the ``data_root`` of the
    dataset it scores and exists.

    Raises:
        DatasetCheckError: names the evaluator's key, the file, the dataset's root and the fix.

    A metric that reads its ground truth from a file of its own scores the predictions against that file whatever
    the dataloader reads, so a dataset moved by its ``data_root`` alone would be scored against the old annotations
    or fail at the first validation, after the training before it.
    """
    for loader, evaluator_key in EVALUATED_LOADERS.items():
        dataloader, evaluator = cfg.get(loader), cfg.get(evaluator_key)
        if loader not in loaders or not dataloader or not dataloader.get('dataset') or not evaluator:
            continue
        roots = [ds['data_root'] for ds in dataset_configs(dataloader['dataset']) if ds.get('data_root')]
        for key, metric in evaluator_metrics(evaluator, evaluator_key):
            for argument in EVALUATOR_INPUTS:
                path = metric.get(argument)
                if not isinstance(path, str) or not path:
                    continue
                what = f'[{evaluator_key}] {metric.get("type")}\'s {argument} {shown(path)}'
                if roots and not any(_inside(path, root) for root in roots):
                    old_root = cfg.get('data_root')
                    tail = (osp.relpath(path, old_root) if isinstance(old_root, str) and _inside(path, old_root)
                            else None)
                    fix = (f'--cfg-options {key}.{argument}={shown(osp.join(roots[0], tail))}' if tail else
                           f'point {key}.{argument} at the file under {shown(roots[0])} (--cfg-options '
                           f'{key}.{argument}=...)')
                    raise DatasetCheckError(
                        f'{what} is not under the data_root of {loader}.dataset ({shown(roots[0])}): the metric '
                        'would score the predictions on that data against another copy\'s ground truth. Fix: '
                        f'{fix}, or set data_root back')
                if not osp.exists(path):
                    raise DatasetCheckError(
                        f'{what} does not exist. Fix: point {key}.{argument} at the ground truth of {loader}.dataset '
                        f'(--cfg-options {key}.{argument}=...)')


def _check_image_folder(loader: str, ds: Mapping, img_path: str | None) -> None:
    """A classification or unlabeled dataset without ``ann_file`` needs its folder."""
    if img_path is None:
        return
    img_dir = osp.join(ds.get('data_root') or '', img_path)
    if not osp.isdir(img_dir):
        raise DatasetCheckError(
            f'[{loader}] the image folder {shown(img_dir)} does not exist. Fix: check data_root '
            f'({shown(ds.get("data_root") or "")}) and data_prefix ({shown(img_path)}) of {loader}.dataset '
            f'(--cfg-options {loader}.dataset.data_root=...); for '
            'demo data run python tools/make_demo_data.py (the config\'s header names the command of its data)')


def _check_det_split(loader: str, ds: Mapping, prefix: Mapping) -> None:
    """A dataset in mmdet's layout needs its annotation file and every folder of its ``data_prefix``."""
    root = ds.get('data_root') or ''
    wanted = [('annotation file', osp.join(root, ds['ann_file']), osp.isfile)] if ds.get('ann_file') else []
    wanted += [(f'{key} folder', osp.join(root, folder), osp.isdir) for key, folder in prefix.items()
               if isinstance(folder, str)]
    missing = [f'{what} {shown(path)}' for what, path, exists in wanted if not exists(path)]
    if missing:
        raise DatasetCheckError(
            f'[{loader}] not found: {"; ".join(missing)}. Fix: check data_root ({shown(root)}), ann_file and '
            f'data_prefix of {loader}.dataset (--cfg-options {loader}.dataset.data_root=...); for demo data run python '
            'tools/make_demo_data.py (the config\'s header names the command of its data)')


def _check_class_names(cfg, loader: str, ds: Mapping) -> None:
    """The class names a dataset config gives (``metainfo.classes``) are names (:func:`check_name`)."""
    classes = (ds.get('metainfo') or {}).get('classes') or ()
    for i, name in enumerate(classes if isinstance(classes, (list, tuple)) else ()):
        check_name(str(name), cfg.filename or 'the config', f'{loader}.dataset.metainfo.classes[{i}]',
                   DatasetCheckError)


def _check_split_list(loader: str, ds: Mapping) -> None:
    """A split file (a text ``ann_file``, one file name per line) names each file once, each a name
    (:func:`check_name_list`), checked line by line before a dataset expands it."""
    ann_file = ds['ann_file']
    path = ann_file if osp.isabs(ann_file) else osp.join(ds.get('data_root') or '', ann_file)
    if ann_file.endswith('.json') or not osp.isfile(path):  # a missing one is the dataset's to name
        return
    try:
        check_name_list(path, DatasetCheckError)
    except (DatasetCheckError, OSError) as error:  # OSError: a FIFO or device, never read
        raise DatasetCheckError(f'[{loader}] {error}') from None


def check_split_folders(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader')) -> None:
    """Before the datasets are built: every segmentation split's image folder exists and holds an image; a split file
    (``ann_file``) names each file once and a name (:func:`~beit_mm.fileio.text_file.check_name_list`), read line by
    line; the class names of ``metainfo`` are names (:func:`~beit_mm.fileio.names.check_name`); the files the
    evaluators of ``loaders`` read follow their datasets (:func:`check_evaluator_files`).

    Raises:
        DatasetCheckError: names the folder, the suffix looked for and the fix; or the split file, its line and the
            fix; or the class name.
    """
    warn_unread_data_root(cfg, loaders)
    scope = cfg.get('default_scope')
    for loader in loaders:
        dataloader = cfg.get(loader)
        if not dataloader or not dataloader.get('dataset'):
            continue
        for ds in dataset_configs(dataloader['dataset']):
            prefix = ds.get('data_prefix') or {}
            _check_class_names(cfg, loader, ds)
            if isinstance(prefix, Mapping) and 'img' in prefix:  # mmdet's layout: COCO, beit_mm.ADE20KPanopticDataset
                _check_det_split(loader, ds, prefix)
                continue
            if ds.get('ann_file'):
                _check_split_list(loader, ds)
                continue
            if isinstance(prefix, str) or 'seg_map_path' not in prefix:  # mmpretrain: class folders, unlabeled pools
                _check_image_folder(loader, ds, prefix if isinstance(prefix, str) else prefix.get('img_path'))
                continue
            img_dir = osp.join(ds.get('data_root') or '', prefix.get('img_path', ''))
            suffix = suffixes(ds.get('img_suffix') or _default_argument(ds['type'], 'img_suffix', scope) or '')
            fix = (f'Fix: check data_root ({shown(ds.get("data_root") or "")}) and data_prefix.img_path '
                   f'({shown(prefix.get("img_path") or "")}) of {loader}.dataset (--cfg-options '
                   f'{loader}.dataset.data_root=...); '
                   'for the demo data run python tools/make_demo_data.py')
            if not osp.isdir(img_dir):
                raise DatasetCheckError(f'[{loader}] the image folder {shown(img_dir)} does not exist. {fix}')
            if not _has_file(img_dir, suffix):
                raise DatasetCheckError(f'[{loader}] the split is empty: no image matched '
                                        f'{shown(img_dir)}/**/*{suffix_text(suffix)}. {fix}, and img_suffix '
                                        f'({suffix[0] if len(suffix) == 1 else suffix!r})')
    check_evaluator_files(cfg, loaders)
