"""A segmentation split checked before the first iteration: the pairing of the file lists, then ``num_samples``
decoded pairs spread evenly over the data list."""
from __future__ import annotations

import logging
import os
import os.path as osp
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from mmcv.transforms import LoadImageFromFile
from mmengine.logging import print_log
from mmseg.datasets.transforms import LoadAnnotations
from torch import nn

from ...fileio.names import shown
from .files import check_pair, loader_applies_orientation
from .labels import DatasetCheckError, LabelRule, label_problems, void_verdict, void_warning

# pairs decoded per split at the start of training
DEFAULT_NUM_SAMPLES = 200


def sample_indices(n: int, num_samples: int | None) -> list[int]:
    """``num_samples`` indices spread evenly over ``range(n)``; all of them when None."""
    if num_samples is None or n <= num_samples:
        return list(range(n))
    return sorted(set(np.round(np.linspace(0, n - 1, num_samples)).astype(int).tolist()))


def _list_files(directory: str, suffix: str) -> list[str]:
    """Paths of files ending with ``suffix`` under ``directory`` (recursive), relative to it."""
    found = []
    for root, _, files in os.walk(directory):
        for name in files:
            if name.endswith(suffix):
                found.append(osp.relpath(osp.join(root, name), directory))
    return found


def suffixes(suffix: str | Sequence[str]) -> tuple[str, ...]:
    """A dataset's ``img_suffix`` as a tuple."""
    return (suffix, ) if isinstance(suffix, str) else tuple(suffix)


def suffix_text(suffix: str | Sequence[str]) -> str:
    """``'.jpg'``, or ``'{.jpg,.png}'`` for several suffixes."""
    names = suffixes(suffix)
    return names[0] if len(names) == 1 else '{' + ','.join(names) + '}'


def _stem(path: str, suffix: str | Sequence[str]) -> str:
    for one in suffixes(suffix):
        if one and path.endswith(one):
            return path[:-len(one)]
    return osp.splitext(path)[0]


@dataclass
class SplitInfo:
    """What :func:`check_split` needs of a dataset split (see :func:`split_info` for mmseg datasets)."""
    name: str
    pairs: Sequence[tuple[str, str]]  # (image path, annotation path), in data-list order
    rule: LabelRule
    img_dir: str = ''
    seg_dir: str = ''
    img_suffix: str | Sequence[str] = ''
    seg_suffix: str = ''
    from_ann_file: bool = False  # the pair list comes from an annotation file: no directory pairing check
    subset: bool = False  # the dataset keeps some of its samples (``indices``): no check for orphan annotations
    applies_orientation: bool = True  # the pipeline's LoadImageFromFile applies EXIF orientation tags (mmcv's default)


def check_split(split: SplitInfo,
                num_samples: int | None = DEFAULT_NUM_SAMPLES,
                progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> tuple[list[str], list[str]]:
    """Check one split.

    Args:
        split: the pairs and conventions of the split.
        num_samples: pairs to decode; None = all.
        progress: wraps the iteration over the decoded indices; None = plain.

    Returns:
        ``(errors, warnings)``: one message per kind of problem found.
    """
    if not split.pairs:
        where = (f'{shown(split.img_dir)}/**/*{suffix_text(split.img_suffix)}' if not split.from_ann_file
                 else 'the annotation file')
        return [f'[{split.name}] the split is empty: no image matched {where}. Fix: check data_root, '
                f'data_prefix.img_path and img_suffix (ADE20K: images/training, .jpg)'], []
    problems = label_problems(split.rule)
    seg_files = None
    if split.seg_dir and osp.isdir(split.seg_dir):
        seg_files = set(_list_files(split.seg_dir, split.seg_suffix))
    first_image: dict[str, str] = {}
    for img_path, seg_path in split.pairs:
        if seg_path in first_image:
            problems['shared_annotation'].add(img_path, f'and {osp.basename(first_image[seg_path])} -> {seg_path}')
        first_image.setdefault(seg_path, img_path)
        exists = (osp.relpath(seg_path, split.seg_dir) in seg_files) if seg_files is not None else osp.isfile(
            seg_path)
        if not exists:
            problems['missing_annotation'].add(img_path, f'expected {seg_path}')
    if seg_files is not None and not (split.from_ann_file or split.subset):
        image_stems = {_stem(osp.relpath(p, split.img_dir), split.img_suffix) for p, _ in split.pairs}
        for rel in sorted(seg_files):
            if _stem(rel, split.seg_suffix) not in image_stems:
                problems['orphan_annotation'].add(osp.join(split.seg_dir, rel))
    missing = set(problems['missing_annotation'].files)
    indices = [i for i in sample_indices(len(split.pairs), num_samples) if split.pairs[i][0] not in missing]
    rule = split.rule
    zero_255 = []  # reduce_zero_label=False: (path, has 255) of maps holding only 0/255; binary if all maps do
    void = []  # reduce_zero_label=True: (path, detail) of maps with 255 beside class values
    seen: set[int] = set()
    for i in (progress(indices) if progress is not None else indices):
        found, values = check_pair(*split.pairs[i], rule, split.applies_orientation)
        for kind, path, detail in found:
            problems[kind].add(path, detail)
        if values is None:
            continue
        seen |= values
        seg_path = split.pairs[i][1]
        if not rule.reduce_zero_label and rule.num_classes > 2 and values <= {0, rule.ignore_index}:
            zero_255.append((seg_path, rule.ignore_index in values))
        if rule.reduce_zero_label and rule.ignore_index in values and not values <= {0, rule.ignore_index}:
            void.append((seg_path, f'255 beside {sorted(values - {rule.ignore_index})[:6]}'))
    if indices and len(zero_255) == len(indices):
        for path, has_255 in zero_255:
            if has_255:
                problems['binary'].add(path, 'values 0 and 255 only')
    warnings = []
    if void and void_verdict(seen, rule) == 'reduced':
        for path, detail in void:
            problems['reduced'].add(path, detail)
    elif void:
        warnings.append(void_warning(split.name, [path for path, _ in void], rule))
    return [p.message(split.name) for p in problems.values() if p.files], warnings


def pipeline_loader(dataset) -> tuple[str, str]:
    """``(color_type, imdecode_backend)`` of the first ``LoadImageFromFile`` in a dataset's pipeline."""
    for transform in getattr(getattr(dataset, 'pipeline', None), 'transforms', []):
        if isinstance(transform, LoadImageFromFile):
            return (str(getattr(transform, 'color_type', 'color')),
                    str(getattr(transform, 'imdecode_backend', 'cv2')))
    return 'color', 'cv2'


def split_info(dataset, name: str) -> SplitInfo:
    """Describe an mmseg ``BaseSegDataset`` (after ``full_init``) for :func:`check_split`."""
    reduce_zero_label = bool(getattr(dataset, 'reduce_zero_label', False))
    for transform in getattr(getattr(dataset, 'pipeline', None), 'transforms', []):
        if isinstance(transform, LoadAnnotations) and transform.reduce_zero_label is not None:
            reduce_zero_label = bool(transform.reduce_zero_label)
    classes_path = getattr(dataset, 'classes_path', None)  # declared by datasets that read their names from a file
    rule = LabelRule(num_classes=len(dataset.metainfo['classes']), reduce_zero_label=reduce_zero_label,
                     ignore_index=int(getattr(dataset, 'ignore_index', 255)),
                     **({'classes_source': classes_path} if classes_path else {}))
    pairs = [(info['img_path'], info['seg_map_path']) for info in
             (dataset.get_data_info(i) for i in range(len(dataset)))]
    prefix = getattr(dataset, 'data_prefix', {}) or {}
    return SplitInfo(
        name=name, pairs=pairs, rule=rule, img_dir=prefix.get('img_path', ''), seg_dir=prefix.get('seg_map_path', ''),
        img_suffix=getattr(dataset, 'img_suffix', ''), seg_suffix=getattr(dataset, 'seg_map_suffix', ''),
        from_ann_file=bool(getattr(dataset, 'ann_file', '')),
        subset=getattr(dataset, '_indices', None) is not None,
        applies_orientation=loader_applies_orientation(*pipeline_loader(dataset)))


def model_head_classes(model) -> list[tuple[str, int]]:
    """``(where, num_classes)`` of every class-predicting head of a built segmentor, or of the segmentor itself."""
    decode_head = getattr(model, 'decode_head', None)
    if decode_head is None:
        n = getattr(model, 'num_classes', None)
        return [] if n is None else [('num_classes', int(n))]
    found = [('decode_head.num_classes', int(decode_head.num_classes))] if hasattr(decode_head, 'num_classes') else []
    aux = getattr(model, 'auxiliary_head', None)
    aux = [] if aux is None else [(f'auxiliary_head.{i}', h) for i, h in enumerate(aux)] if isinstance(
        aux, (list, tuple, nn.ModuleList)) else [('auxiliary_head', aux)]
    return found + [(f'{where}.num_classes', int(h.num_classes)) for where, h in aux if hasattr(h, 'num_classes')]


def config_head_classes(model_cfg) -> list[tuple[str, int]]:
    """:func:`model_head_classes` read from a model config (``cfg.model``) without building it."""
    decode_head = model_cfg.get('decode_head')
    if not decode_head:
        n = model_cfg.get('num_classes')
        return [] if n is None else [('num_classes', int(n))]
    found = [('decode_head.num_classes', int(decode_head['num_classes']))] if 'num_classes' in decode_head else []
    aux = model_cfg.get('auxiliary_head')
    aux = [] if not aux else [(f'auxiliary_head.{i}', h) for i, h in enumerate(aux)] if isinstance(
        aux, (list, tuple)) else [('auxiliary_head', aux)]
    return found + [(f'{where}.num_classes', int(h['num_classes'])) for where, h in aux if 'num_classes' in h]


def head_classes_problem(heads: Sequence[tuple[str, int]], num_classes: int,
                         classes_path: str | None = None) -> str | None:
    """The message when a head predicts another number of classes than the training set has, else None.

    Args:
        heads: ``(where, num_classes)`` pairs.
        num_classes: the training set's class count.
        classes_path: the file the dataset read its names from, if any.
    """
    wrong = [(where, n) for where, n in heads if n != num_classes]
    if not wrong:
        return None
    source = f'{shown(classes_path)} lists {num_classes}' if classes_path else 'metainfo classes'
    options = ' '.join(f'model.{where}={num_classes}' for where, _ in heads)
    other = (f'or list the {wrong[0][1]} classes the model predicts in {shown(classes_path)}' if classes_path else
             "or set the dataset's metainfo to the classes the model predicts")
    return (f'{", ".join(f"{where}={n}" for where, n in wrong)} but the training set has {num_classes} classes '
            f'({source}). Fix: --cfg-options {options} (or set them in the config), {other}')


def leaf_datasets(dataset) -> list:
    """The datasets inside mmengine's dataset wrappers."""
    if hasattr(dataset, 'datasets'):
        return [leaf for d in dataset.datasets for leaf in leaf_datasets(d)]
    if hasattr(dataset, 'dataset') and not hasattr(dataset, 'data_list'):
        return leaf_datasets(dataset.dataset)
    return [dataset]


def check_seg_dataset(dataset, name: str, num_samples: int | None = DEFAULT_NUM_SAMPLES,
                      progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> int:
    """Check every segmentation split inside ``dataset``; datasets without ``seg_map_path`` are skipped.

    Returns:
        The number of pairs decoded.

    Raises:
        DatasetCheckError: one line per problem, each naming files, count and fix.
    """
    messages, decoded = [], 0
    for i, leaf in enumerate(leaf_datasets(dataset)):
        if len(leaf) and 'seg_map_path' not in leaf.get_data_info(0):
            continue
        split = split_info(leaf, name if i == 0 else f'{name}[{i}]')
        errors, warnings = check_split(split, num_samples, progress)
        messages += errors
        for warning in warnings:
            print_log(warning, logger='current', level=logging.WARNING)
        decoded += len(sample_indices(len(split.pairs), num_samples))
    if messages:
        raise DatasetCheckError('dataset check failed (beit_mm.data.checks; full scan: python '
                                'tools/analysis/check_dataset.py CONFIG):\n' + '\n'.join(messages))
    return decoded
