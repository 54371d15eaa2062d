"""Checks of a semantic-segmentation dataset before the first iteration: file pairing, decodable files, sizes and
label values, each failure an error that names the files, their count and the fix.

What is checked, per split (an mmseg ``BaseSegDataset`` such as ``ADE20KDataset``):

=========================  =====================================================  ==================================
problem                    how it is found                                        cost
=========================  =====================================================  ==================================
empty split                no image matched ``img_path/**/*<img_suffix>``         free (mmseg's own file list)
image without annotation   ``seg_map_path`` of a data-list entry does not exist   one directory listing
annotation without image   an annotation file whose stem no image has             one directory listing
unreadable / truncated     PIL fails to decode the whole file                     decode, sampled
size mismatch              image (W, H) != annotation (W, H)                      decode, sampled
colour annotation          annotation is not single-channel                       decode, sampled
labels out of range        a value that is neither a class nor ignored after      decode, sampled
                           ``reduce_zero_label`` (``F.cross_entropy``: "Target
                           199 is out of bounds", a device-side assert on GPUs)
0/255 masks                annotations hold only 0 and 255 (binary images)        decode, sampled
reduced twice              ``reduce_zero_label=True`` on masks that contain 255   decode, sampled
                           beside class values (already reduced offline)
=========================  =====================================================  ==================================

Sampling rule (so that a start costs seconds on ADE20K's 20k images): the file lists are checked completely; pairs
are decoded for ``num_samples`` entries spread evenly over the (sorted) data list, indices
``round(linspace(0, N - 1, num_samples))`` -- the same files every time, all of them when ``N <= num_samples`` or
``num_samples=None``. ``tools/analysis/check_dataset.py CONFIG`` decodes every pair (with a progress bar), and
``beit_mm.SegDatasetCheckHook`` also checks the label values of every training batch, naming the annotation file, so
a bad file that the sample missed stops the run at the iteration that loads it, before the loss sees it.

Raw ADE20K masks (the layout of ``tools/make_demo_data.py``): 0 = "other", 1..150 = classes; with
``reduce_zero_label=True`` mmseg maps 0 -> 255 (ignored) and k -> k - 1, and a raw 255 stays 255.
"""
from __future__ import annotations

import os
import os.path as osp
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

# files named per problem in a message; the count is always complete
MAX_NAMED_FILES = 5
# pairs decoded per split at the start of training (see the module docstring)
DEFAULT_NUM_SAMPLES = 200


class DatasetCheckError(ValueError):
    """A dataset failed :func:`check_seg_dataset`; the message lists every problem with files, count and fix."""


@dataclass(frozen=True)
class LabelRule:
    """What label values a split may hold on disk.

    Args:
        num_classes: classes the model predicts (after ``reduce_zero_label``).
        reduce_zero_label: whether the loader maps 0 -> ignore and k -> k - 1.
        ignore_index: the ignored value after loading (255 in mmseg).
    """
    num_classes: int
    reduce_zero_label: bool
    ignore_index: int = 255

    def valid_raw_range(self) -> str:
        if self.reduce_zero_label:
            return (f'0..{self.num_classes} (0 = ignored, 1..{self.num_classes} -> classes 0..{self.num_classes - 1}, '
                    f'reduce_zero_label=True) or {self.ignore_index}')
        return f'0..{self.num_classes - 1} (reduce_zero_label=False) or the ignore index {self.ignore_index}'

    def out_of_range(self, values: Iterable[int]) -> list[int]:
        """Raw values that are neither a class nor ignored after loading."""
        top = self.num_classes if self.reduce_zero_label else self.num_classes - 1
        return sorted(v for v in values if v > top and v != self.ignore_index)


@dataclass
class Problem:
    """Files with one kind of problem: ``what`` describes it, ``fix`` says what to do."""
    what: str
    fix: str
    files: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def add(self, path: str, detail: str = '') -> None:
        self.files.append(path)
        self.details.append(detail)

    def message(self, split: str) -> str:
        named = [f'{f} ({d})' if d else f for f, d in zip(self.files, self.details)][:MAX_NAMED_FILES]
        more = f' and {len(self.files) - len(named)} more' if len(self.files) > len(named) else ''
        return f'[{split}] {len(self.files)} {self.what}: {", ".join(named)}{more}. Fix: {self.fix}'


def label_problems(rule: LabelRule) -> dict[str, Problem]:
    """A fresh, empty :class:`Problem` for every kind of problem, with its description and fix for ``rule``."""
    return dict(
        missing_annotation=Problem(
            'image(s) without an annotation file',
            'add the annotations, delete the images, or correct data_prefix.seg_map_path / seg_map_suffix'),
        orphan_annotation=Problem(
            'annotation file(s) without an image',
            'add the images, delete the annotations, or correct data_prefix.img_path / img_suffix'),
        unreadable=Problem(
            'file(s) that cannot be decoded (not an image, or truncated)',
            're-download or re-encode them, or delete the image/annotation pair'),
        size_mismatch=Problem(
            'image/annotation pair(s) of different sizes',
            'annotations must have their image\'s size: regenerate them, or resize them with nearest-neighbour '
            'interpolation'),
        colour=Problem(
            'annotation(s) that are not single-channel label maps',
            'convert colour-coded masks to single-channel maps of class indices'),
        binary=Problem(
            'annotation(s) holding only 0 and 255, binary masks rather than class indices',
            f'store class indices {rule.valid_raw_range()}; for a two-class set write 0/1, not 0/255'),
        reduced=Problem(
            'annotation(s) containing 255 beside class values: they look already reduced (0 -> 255, k -> k - 1), '
            'and reduce_zero_label=True would reduce them a second time',
            'use the raw masks, or set reduce_zero_label=False in the dataset and in LoadAnnotations'),
        out_of_range=Problem(
            f'annotation(s) with label values outside {rule.valid_raw_range()}',
            f'check the annotation conversion, the class count ({rule.num_classes} in the dataset metainfo and '
            'decode_head.num_classes) and reduce_zero_label'),
    )


def check_label_values(values: Iterable[int], rule: LabelRule) -> tuple[str, str] | None:
    """The problem with one annotation's set of raw values: ``(kind, detail)``, or None when it is valid.

    With ``reduce_zero_label=False`` a map of only 0 and 255 is valid (class 0 and ignored pixels);
    :func:`check_split` reports it as a binary mask only when every decoded map of the split looks like that.

    Args:
        values: the distinct values of one single-channel annotation.
        rule: the split's label convention.
    """
    present = set(int(v) for v in values)
    if rule.reduce_zero_label and rule.ignore_index in present and present <= {0, rule.ignore_index}:
        return 'binary', 'values 0 and 255 only'
    if rule.reduce_zero_label and rule.ignore_index in present:
        return 'reduced', f'255 beside {sorted(present - {rule.ignore_index})[:6]}'
    bad = rule.out_of_range(present)
    if bad:
        return 'out_of_range', f'values {bad[:6]}'
    return None


def _decode(path: str) -> Image.Image:
    """Open and fully decode ``path`` (PIL raises on a truncated or non-image file)."""
    with Image.open(path) as image:
        image.load()
        return image


def check_pair(img_path: str, seg_path: str, rule: LabelRule) -> list[tuple[str, str, str]]:
    """Decode one image/annotation pair and check it.

    Returns:
        list of ``(kind, path, detail)``; empty when the pair is fine.
    """
    found = []
    images = {}
    for path in (img_path, seg_path):
        try:
            images[path] = _decode(path)
        except Exception as error:  # noqa: BLE001 -- PIL raises OSError, UnidentifiedImageError, SyntaxError, ...
            found.append(('unreadable', path, f'{type(error).__name__}: {error}'))
    if len(images) < 2:
        return found
    image, seg = images[img_path], images[seg_path]
    if image.size != seg.size:
        found.append(('size_mismatch', seg_path, f'annotation {seg.size[0]}x{seg.size[1]}, image '
                      f'{image.size[0]}x{image.size[1]}'))
    labels = np.asarray(seg)  # palette PNGs give their indices
    if labels.ndim != 2:
        found.append(('colour', seg_path, f'shape {labels.shape}'))
        return found
    problem = check_label_values(np.unique(labels).tolist(), rule)
    if problem is not None:
        found.append((problem[0], seg_path, problem[1]))
    return found


def _values(seg_path: str) -> set[int]:
    return set(np.unique(np.asarray(_decode(seg_path))).tolist())


def sample_indices(n: int, num_samples: int | None) -> list[int]:
    """``num_samples`` indices spread evenly over ``range(n)`` (all of them when ``n <= num_samples`` or None)."""
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


def _stem(path: str, suffix: str) -> str:
    return path[:-len(suffix)] if suffix and path.endswith(suffix) else osp.splitext(path)[0]


@dataclass
class SplitInfo:
    """What :func:`check_split` needs of a dataset split (see :func:`split_info` for mmseg datasets)."""
    name: str
    pairs: Sequence[tuple[str, str]]  # (image path, annotation path), in data-list order
    rule: LabelRule
    img_dir: str = ''
    seg_dir: str = ''
    img_suffix: str = ''
    seg_suffix: str = ''
    from_ann_file: bool = False  # the pair list comes from an annotation file: no directory pairing check
    subset: bool = False  # the dataset keeps some of its samples (``indices``): no check for orphan annotations


def check_split(split: SplitInfo,
                num_samples: int | None = DEFAULT_NUM_SAMPLES,
                progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> list[str]:
    """Check one split; returns one message per kind of problem found (empty when the split is fine).

    Args:
        split: the pairs and conventions of the split.
        num_samples: pairs to decode (see the module docstring); None = all.
        progress: wraps the iteration over the decoded indices (a progress bar); None = plain.
    """
    if not split.pairs:
        where = (f'{split.img_dir}/**/*{split.img_suffix}' if not split.from_ann_file else 'the annotation file')
        return [f'[{split.name}] the split is empty: no image matched {where}. Fix: check data_root, '
                f'data_prefix.img_path and img_suffix (ADE20K: images/training, .jpg)']
    problems = label_problems(split.rule)
    seg_files = None
    if split.seg_dir and osp.isdir(split.seg_dir):
        seg_files = set(_list_files(split.seg_dir, split.seg_suffix))
    for img_path, seg_path in split.pairs:
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
    zero_255 = []  # reduce_zero_label=False: (path, has 255) of maps holding only 0/255; binary if all maps do
    for i in (progress(indices) if progress is not None else indices):
        for kind, path, detail in check_pair(*split.pairs[i], split.rule):
            problems[kind].add(path, detail)
        if not split.rule.reduce_zero_label and split.rule.num_classes > 2:
            seg_path = split.pairs[i][1]
            values = None if seg_path in problems['unreadable'].files else _values(seg_path)
            if values is not None and values <= {0, split.rule.ignore_index}:
                zero_255.append((seg_path, split.rule.ignore_index in values))
    if indices and len(zero_255) == len(indices):
        for path, has_255 in zero_255:
            if has_255:
                problems['binary'].add(path, 'values 0 and 255 only')
    return [p.message(split.name) for p in problems.values() if p.files]


def split_info(dataset, name: str) -> SplitInfo:
    """Describe an mmseg ``BaseSegDataset`` (after ``full_init``) for :func:`check_split`.

    ``reduce_zero_label`` is the one ``LoadAnnotations`` in the pipeline uses (its own argument, else the
    dataset's); the class count is ``len(dataset.metainfo['classes'])``; the ignore index ``dataset.ignore_index``.
    """
    reduce_zero_label = bool(getattr(dataset, 'reduce_zero_label', False))
    for transform in getattr(getattr(dataset, 'pipeline', None), 'transforms', []):
        if type(transform).__name__ == 'LoadAnnotations' and getattr(transform, 'reduce_zero_label', None) is not None:
            reduce_zero_label = bool(transform.reduce_zero_label)
    rule = LabelRule(num_classes=len(dataset.metainfo['classes']), reduce_zero_label=reduce_zero_label,
                     ignore_index=int(getattr(dataset, 'ignore_index', 255)))
    pairs = [(info['img_path'], info['seg_map_path']) for info in
             (dataset.get_data_info(i) for i in range(len(dataset)))]
    prefix = getattr(dataset, 'data_prefix', {}) or {}
    return SplitInfo(
        name=name, pairs=pairs, rule=rule, img_dir=prefix.get('img_path', ''), seg_dir=prefix.get('seg_map_path', ''),
        img_suffix=getattr(dataset, 'img_suffix', ''), seg_suffix=getattr(dataset, 'seg_map_suffix', ''),
        from_ann_file=bool(getattr(dataset, 'ann_file', '')),
        subset=getattr(dataset, '_indices', None) is not None)


def leaf_datasets(dataset) -> list:
    """The datasets inside mmengine's wrappers (``ConcatDataset.datasets``, ``RepeatDataset.dataset``, ...)."""
    if hasattr(dataset, 'datasets'):
        return [leaf for d in dataset.datasets for leaf in leaf_datasets(d)]
    if hasattr(dataset, 'dataset') and not hasattr(dataset, 'data_list'):
        return leaf_datasets(dataset.dataset)
    return [dataset]


def check_seg_dataset(dataset, name: str, num_samples: int | None = DEFAULT_NUM_SAMPLES,
                      progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> int:
    """Check every segmentation split inside ``dataset``; raise :class:`DatasetCheckError` listing all problems.

    Datasets without ``seg_map_path`` entries (classification, MIM) are skipped.

    Returns:
        int: the number of pairs decoded.
    Raises:
        DatasetCheckError: one line per problem, each naming files, count and fix.
    """
    messages, decoded = [], 0
    for i, leaf in enumerate(leaf_datasets(dataset)):
        if len(leaf) and 'seg_map_path' not in leaf.get_data_info(0):
            continue
        split = split_info(leaf, name if i == 0 else f'{name}[{i}]')
        messages += check_split(split, num_samples, progress)
        decoded += len(sample_indices(len(split.pairs), num_samples))
    if messages:
        raise DatasetCheckError('dataset check failed (beit_mm.data.checks; full scan: python '
                                'tools/analysis/check_dataset.py CONFIG):\n' + '\n'.join(messages))
    return decoded


def _dataset_cfgs(node) -> list:
    """The leaf dataset configs of a dataloader's ``dataset`` (inside ``dataset=`` / ``datasets=`` wrappers)."""
    if 'datasets' in node:
        return [leaf for d in node['datasets'] for leaf in _dataset_cfgs(d)]
    if 'dataset' in node:
        return _dataset_cfgs(node['dataset'])
    return [node]


def _default_argument(dataset_type: str, name: str, scope: str | None):
    import inspect

    from mmengine.registry import DATASETS
    with DATASETS.switch_scope_and_registry(scope) as registry:
        cls = registry.get(dataset_type)
    parameter = inspect.signature(cls.__init__).parameters.get(name) if cls is not None else None
    return None if parameter is None else parameter.default


def _has_file(directory: str, suffix: str) -> bool:
    for _, _, files in os.walk(directory):
        if any(name.endswith(suffix) for name in files):
            return True
    return False


def check_split_folders(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader')) -> None:
    """Before the datasets are built: every segmentation split's image folder exists and holds an image.

    MMEngine's ``BaseDataset`` fails on an empty split inside ``np.concatenate`` ("need at least one array to
    concatenate") and on a missing folder with a bare ``FileNotFoundError``; ``tools/train.py`` and
    ``tools/analysis/check_dataset.py`` call this first. Splits listed by an ``ann_file`` are not checked here.

    Raises:
        DatasetCheckError: names the folder, the suffix looked for and the fix.
    """
    scope = cfg.get('default_scope')
    for loader in loaders:
        dataloader = cfg.get(loader)
        if not dataloader or not dataloader.get('dataset'):
            continue
        for ds in _dataset_cfgs(dataloader['dataset']):
            prefix = ds.get('data_prefix') or {}
            if 'seg_map_path' not in prefix or ds.get('ann_file'):
                continue
            img_dir = osp.join(ds.get('data_root') or '', prefix.get('img_path', ''))
            suffix = ds.get('img_suffix') or _default_argument(ds['type'], 'img_suffix', scope) or ''
            fix = (f'Fix: check data_root ({ds.get("data_root")!r}) and data_prefix.img_path '
                   f'({prefix.get("img_path")!r}) of {loader}.dataset (--cfg-options {loader}.dataset.data_root=...); '
                   'for the demo data run python tools/make_demo_data.py')
            if not osp.isdir(img_dir):
                raise DatasetCheckError(f'[{loader}] the image folder {img_dir} does not exist. {fix}')
            if not _has_file(img_dir, suffix):
                raise DatasetCheckError(f'[{loader}] the split is empty: no image matched {img_dir}/**/*{suffix}. '
                                        f'{fix}, and img_suffix ({suffix!r})')
