"""Checks of a semantic-segmentation dataset before the first iteration: file pairing, decodable files, sizes and
label values, each failure an error that names the files, their count and the fix.

What is checked, per split (an mmseg ``BaseSegDataset`` such as ``ADE20KDataset``):

=========================  =====================================================  ==================================
problem                    how it is found                                        cost
=========================  =====================================================  ==================================
empty split                no image matched ``img_path/**/*<img_suffix>``         free (mmseg's own file list)
image without annotation   ``seg_map_path`` of a data-list entry does not exist   one directory listing
annotation without image   an annotation file whose stem no image has             one directory listing
shared annotation          two images of one stem (``a.jpg``, ``a.png``) read     the file list
                           one annotation
unreadable / truncated     PIL fails to decode the whole file                     decode, sampled
size mismatch              image (W, H) as mmcv's loader returns it (after its    decode, sampled
                           EXIF orientation, see below) != annotation (W, H)
EXIF-rotated image         the loader rotates the image to another size than      decode, sampled
                           its annotation, which has the stored size
EXIF tag, same size        the loader rotates/flips the image without changing    decode, sampled
                           its size (square image, or a 180-degree/flip tag):
                           the labels may be turned against the pixels
lossy annotation           the annotation file holds JPEG data (any name)         decode, sampled
colour annotation          annotation is not single-channel                       decode, sampled
labels out of range        a value that is neither a class nor ignored after      decode, sampled
                           ``reduce_zero_label`` (``F.cross_entropy``: "Target
                           199 is out of bounds", a device-side assert on GPUs)
0/255 masks                annotations hold only 0 and 255 (binary images)        decode, sampled
reduced twice              ``reduce_zero_label=True``, 255 beside class values,   decode, sampled
                           no 0 in any decoded map and ``num_classes - 1`` the
                           largest class value (see "Void pixels")
=========================  =====================================================  ==================================

Sampling rule (so that a start costs seconds on ADE20K's 20k images): the file lists are checked completely; pairs
are decoded for ``num_samples`` entries spread evenly over the (sorted) data list, indices
``round(linspace(0, N - 1, num_samples))`` -- the same files every time, all of them when ``N <= num_samples`` or
``num_samples=None``. ``tools/analysis/check_dataset.py CONFIG`` decodes every pair (with a progress bar), and
``beit_mm.SegDatasetCheckHook`` also checks the label values of every training batch, naming the annotation file, so
a bad file that the sample missed stops the run at the iteration that loads it, before the loss sees it.

Raw ADE20K masks (the layout of ``tools/make_demo_data.py``): 0 = "other", 1..150 = classes; with
``reduce_zero_label=True`` mmseg maps 0 -> 255 (ignored) and k -> k - 1, and a raw 255 stays 255.

EXIF orientation: mmcv's ``LoadImageFromFile`` applies the orientation tag (0x0112) of JPEG and PNG files with its
default ``color_type='color'`` (also ``'grayscale'``) on the cv2 and pillow backends, and ignores it with
``'unchanged'``, ``'color_ignore_orientation'``, ``'grayscale_ignore_orientation'`` and the turbojpeg/tifffile
backends (:func:`loader_applies_orientation`); mmseg's ``LoadAnnotations`` reads label maps with ``'unchanged'``, so
they are never rotated. A phone photo stored 64x48 with ``Orientation=6`` reaches the model as 48x64 beside its 64x48
annotation; a square one is rotated silently.

Void pixels: a raw 255 beside class values is how some sets mark void pixels, and mmseg keeps it as 255 (ignored) with
``reduce_zero_label=True``; masks that were reduced offline (0 -> 255, k -> k - 1) look the same. Only the pattern
that raw masks cannot show is an error: 255 present, no 0 in any decoded map (raw masks mark "other" with 0; reduced
ones turned it into 255) and ``num_classes - 1`` the largest class value (``num_classes`` would be a raw value). Any
other 255 gets one warning per split saying how it is treated.
"""
from __future__ import annotations

import logging
import os
import os.path as osp
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from mmcv.transforms import LoadImageFromFile
from mmengine.logging import print_log
from mmseg.datasets.transforms import LoadAnnotations
from PIL import Image
from torch import nn

# files named per problem in a message; the count is always complete
MAX_NAMED_FILES = 5
# pairs decoded per split at the start of training (see the module docstring)
DEFAULT_NUM_SAMPLES = 200
# EXIF orientation tag and what its values do to the stored pixels (EXIF 2.3, tag 0x0112); 5..8 swap width and height
EXIF_ORIENTATION = 0x0112
ORIENTATIONS = {2: 'mirrored', 3: 'rotated 180 degrees', 4: 'flipped upside down', 5: 'mirrored and rotated 90 degrees',
                6: 'rotated 90 degrees clockwise', 7: 'mirrored and rotated 270 degrees',
                8: 'rotated 90 degrees counter-clockwise'}
_SWAPS_SIDES = (5, 6, 7, 8)
# color_type values of mmcv's LoadImageFromFile that apply the tag, on the backends that do (cv2: OpenCV applies it
# unless IMREAD_UNCHANGED or IMREAD_IGNORE_ORIENTATION; pillow: mmcv's _pillow2array calls ImageOps.exif_transpose)
_ORIENTING_COLOR_TYPES = ('color', 'grayscale')
_ORIENTING_BACKENDS = ('cv2', 'pillow')
# what PIL calls JPEG data (MPO: the multi-picture JPEG that phones write)
_LOSSY_FORMATS = ('JPEG', 'MPO')


class DatasetCheckError(ValueError):
    """A dataset failed :func:`check_seg_dataset`; the message lists every problem with files, count and fix."""


@dataclass(frozen=True)
class LabelRule:
    """What label values a split may hold on disk.

    Args:
        num_classes: classes the model predicts (after ``reduce_zero_label``).
        reduce_zero_label: whether the loader maps 0 -> ignore and k -> k - 1.
        ignore_index: the ignored value after loading (255 in mmseg).
        classes_source: where the class names come from, for the fixes (``beit_mm.CustomSegDataset``: its
            ``classes.txt``).
    """
    num_classes: int
    reduce_zero_label: bool
    ignore_index: int = 255
    classes_source: str = 'the dataset metainfo'

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


def file_problems() -> dict[str, Problem]:
    """A fresh, empty :class:`Problem` for every problem of files, pairing, sizes and encoding (no label rule)."""
    return dict(
        missing_annotation=Problem(
            'image(s) without an annotation file',
            'add the annotations, delete the images, or correct data_prefix.seg_map_path / seg_map_suffix'),
        orphan_annotation=Problem(
            'annotation file(s) without an image',
            'add the images, delete the annotations, or correct data_prefix.img_path / img_suffix'),
        shared_annotation=Problem(
            'image(s) sharing their annotation with another image of the same name and another suffix',
            'keep one image per name (delete or rename the other one: every image needs its own mask)'),
        unreadable=Problem(
            'file(s) that cannot be decoded (not an image, or truncated)',
            're-download or re-encode them, or delete the image/annotation pair'),
        size_mismatch=Problem(
            'image/annotation pair(s) of different sizes',
            'annotations must have their image\'s size: regenerate them, or resize them with nearest-neighbour '
            'interpolation'),
        exif_rotated=Problem(
            'image(s) with an EXIF orientation tag that mmcv\'s loader applies, turning them to another size than '
            'their annotation (which has the stored size)',
            'the annotations follow the stored pixels: load the images with '
            "LoadImageFromFile(color_type='color_ignore_orientation') in the train and test pipelines, or re-save "
            'the images without the tag; if the labels were drawn on the upright picture, regenerate them'),
        exif_same_size=Problem(
            'image(s) with an EXIF orientation tag that mmcv\'s loader applies without changing their size (square '
            'images, or a flip or 180-degree tag), so their labels may be turned against the pixels',
            're-save the images upright (PIL: ImageOps.exif_transpose(image).save(path), which drops the tag) if the '
            "annotations follow the upright picture, or load with LoadImageFromFile(color_type="
            "'color_ignore_orientation') in the train and test pipelines if they follow the stored pixels"),
        lossy=Problem(
            'annotation(s) holding JPEG data: lossy compression changes label values along every class border',
            'export the label maps again losslessly (PNG) from the original annotations; converting these JPEG files '
            'to PNG keeps the damaged values'),
        colour=Problem(
            'annotation(s) that are not single-channel label maps',
            'convert colour-coded masks to single-channel maps of class indices'),
    )


def label_problems(rule: LabelRule) -> dict[str, Problem]:
    """A fresh, empty :class:`Problem` for every kind of problem, with its description and fix for ``rule``."""
    return dict(
        **file_problems(),
        binary=Problem(
            'annotation(s) holding only 0 and 255, binary masks rather than class indices',
            f'store class indices {rule.valid_raw_range()}; for a two-class set write 0/1, not 0/255'),
        reduced=Problem(
            f'annotation(s) containing 255 beside class values, while no decoded annotation holds 0 and '
            f'{rule.num_classes - 1} is the largest class value: they are already reduced (0 -> 255, k -> k - 1), and '
            'reduce_zero_label=True would reduce them a second time',
            'use the raw masks, or set reduce_zero_label=False in the dataset and in LoadAnnotations'),
        out_of_range=Problem(
            f'annotation(s) with label values outside {rule.valid_raw_range()}',
            f'check the annotation conversion, the class count ({rule.num_classes} in {rule.classes_source} and '
            'decode_head.num_classes) and reduce_zero_label'),
    )


def check_label_values(values: Iterable[int], rule: LabelRule) -> tuple[str, str] | None:
    """The problem with one annotation's set of raw values: ``(kind, detail)``, or None when it is valid.

    With ``reduce_zero_label=False`` a map of only 0 and 255 is valid (class 0 and ignored pixels);
    :func:`check_split` reports it as a binary mask only when every decoded map of the split looks like that. 255
    beside class values is judged over the whole split (:func:`void_verdict`), not here.

    Args:
        values: the distinct values of one single-channel annotation.
        rule: the split's label convention.
    """
    present = set(int(v) for v in values)
    if rule.reduce_zero_label and rule.ignore_index in present and present <= {0, rule.ignore_index}:
        return 'binary', 'values 0 and 255 only'
    bad = rule.out_of_range(present)
    if bad:
        return 'out_of_range', f'values {bad[:6]}'
    return None


def void_verdict(values: Iterable[int], rule: LabelRule) -> str | None:
    """How a split's 255 beside class values is read, from the union of the raw values of its decoded annotations.

    Returns:
        ``'reduced'`` when the masks are certainly reduced already (255 present, no 0 anywhere, the largest class
        value ``num_classes - 1``: both marks of raw masks, 0 = "other" and the top value ``num_classes``, are
        missing, and both marks of reduction are there); ``'void'`` for any other 255 beside class values under
        ``reduce_zero_label=True`` (kept as 255 = ignored by mmseg); None when there is nothing to say.
    """
    present = set(int(v) for v in values)
    classes = present - {rule.ignore_index}
    if not rule.reduce_zero_label or rule.ignore_index not in present or not classes - {0}:
        return None
    if 0 not in classes and max(classes) == rule.num_classes - 1:
        return 'reduced'
    return 'void'


def void_warning(split: str, files: Sequence[str], rule: LabelRule) -> str:
    """The one warning for a split whose annotations hold 255 beside class values that may be void pixels."""
    named = ', '.join(files[:MAX_NAMED_FILES]) + (f' and {len(files) - MAX_NAMED_FILES} more'
                                                  if len(files) > MAX_NAMED_FILES else '')
    return (f'[{split}] {len(files)} annotation(s) hold 255 beside class values ({named}). With reduce_zero_label=True '
            f'mmseg keeps a raw 255 as {rule.ignore_index} (ignored, like the raw 0 = "other") and maps k -> k - 1, '
            'so these pixels are treated as void and left out of the loss. If the masks were instead reduced offline '
            '(0 -> 255, k -> k - 1), every class would be shifted twice: then set reduce_zero_label=False in the '
            'dataset and in LoadAnnotations.')


def exif_orientation(image: Image.Image) -> int:
    """The EXIF orientation tag of an opened image (1 = upright, also when there is no tag or no EXIF)."""
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 -- a malformed EXIF block: PIL raises various errors; the loader ignores it too
        return 1
    return int(value) if isinstance(value, int) and value in range(1, 9) else 1


def loader_applies_orientation(color_type: str = 'color', imdecode_backend: str = 'cv2') -> bool:
    """Whether mmcv's ``LoadImageFromFile(color_type=..., imdecode_backend=...)`` applies an image's EXIF orientation
    (``tests/data/test_dataset_checks.py`` compares this with mmcv's decoder for every combination)."""
    return color_type in _ORIENTING_COLOR_TYPES and imdecode_backend in _ORIENTING_BACKENDS


def loaded_size(stored: tuple[int, int], orientation: int, applies_orientation: bool) -> tuple[int, int]:
    """``(W, H)`` of an image as the loader returns it, from its stored ``(W, H)`` and orientation tag."""
    if applies_orientation and orientation in _SWAPS_SIDES:
        return stored[1], stored[0]
    return stored


def _decode(path: str) -> Image.Image:
    """Open and fully decode ``path`` through the file room (a regular file within the pixel limit:
    :func:`beit_mm.fileio.inputs.open_image`; PIL raises on a truncated or non-image file)."""
    from ..fileio.inputs import open_image
    return open_image(path)


def _size(size: tuple[int, int]) -> str:
    return f'{size[0]}x{size[1]}'


def image_annotation_problem(image_size: tuple[int, int], orientation: int, seg_size: tuple[int, int],
                             applies_orientation: bool = True) -> tuple[str, str] | None:
    """The size/orientation problem of one pair: ``(kind, detail)`` or None.

    Args:
        image_size: the image's stored ``(W, H)``.
        orientation: its EXIF orientation tag (1 = none).
        seg_size: the annotation's ``(W, H)`` (annotations are never rotated: mmseg reads them ``'unchanged'``).
        applies_orientation: whether the pipeline's loader applies the tag (:func:`loader_applies_orientation`).
    """
    loaded = loaded_size(image_size, orientation, applies_orientation)
    tag = f'EXIF orientation {orientation}: {ORIENTATIONS.get(orientation, "")}'
    if loaded != seg_size:
        if loaded != image_size and image_size == seg_size:
            return 'exif_rotated', (f'stored {_size(image_size)}, {tag}, loaded {_size(loaded)}; annotation '
                                    f'{_size(seg_size)}')
        detail = f'annotation {_size(seg_size)}, image {_size(loaded)}'
        if orientation in _SWAPS_SIDES and loaded_size(image_size, orientation, True) == seg_size:
            detail += (f' ({tag}: the annotation has the upright size, but this pipeline ignores the tag; load with '
                       "color_type='color')")
        elif loaded != image_size:
            detail += f' as loaded (stored {_size(image_size)}, {tag})'
        return 'size_mismatch', detail
    if applies_orientation and orientation != 1:
        return 'exif_same_size', f'{_size(image_size)}, {tag}'
    return None


def check_pair(img_path: str, seg_path: str, rule: LabelRule,
               applies_orientation: bool = True) -> tuple[list[tuple[str, str, str]], set[int] | None]:
    """Decode one image/annotation pair and check it.

    Args:
        img_path, seg_path: the pair.
        rule: the split's label convention.
        applies_orientation: whether the pipeline's image loader applies EXIF orientation tags.

    Returns:
        ``(problems, values)``: a list of ``(kind, path, detail)``, empty when the pair is fine, and the distinct raw
        values of the annotation (None when it could not be read as a single-channel map).
    """
    found = []
    images = {}
    for path in (img_path, seg_path):
        try:
            images[path] = _decode(path)
        except Exception as error:  # noqa: BLE001 -- PIL raises OSError, UnidentifiedImageError, SyntaxError, ...
            found.append(('unreadable', path, f'{type(error).__name__}: {error}'))
    if len(images) < 2:
        return found, None
    image, seg = images[img_path], images[seg_path]
    problem = image_annotation_problem(image.size, exif_orientation(image), seg.size, applies_orientation)
    if problem is not None:
        found.append((problem[0], img_path if problem[0].startswith('exif') else seg_path, problem[1]))
    if seg.format in _LOSSY_FORMATS:
        found.append(('lossy', seg_path, f'{seg.format} data' + ('' if seg_path.lower().endswith(('.jpg', '.jpeg'))
                                                                else f' in a {osp.splitext(seg_path)[1]} file')))
    labels = np.asarray(seg)  # palette PNGs give their indices
    if labels.ndim != 2:
        found.append(('colour', seg_path, f'shape {labels.shape}'))
        return found, None
    values = set(np.unique(labels).tolist())
    problem = check_label_values(values, rule)
    if problem is not None:
        found.append((problem[0], seg_path, problem[1]))
    return found, values


def check_loaded_pair(img_path: str, seg_path: str, loaded_hw: Sequence[int],
                      applies_orientation: bool = True) -> tuple[str, str, str] | None:
    """Check a pair as the pipeline loaded it, reading only the two files' headers (no decode; for every batch).

    Args:
        img_path, seg_path: the pair (local files; anything else is skipped).
        loaded_hw: ``(H, W)`` of the image as the loader returned it (``ori_shape`` in mmseg's sample metainfo).
        applies_orientation: whether the pipeline's loader applies EXIF orientation tags.

    Returns:
        ``(kind, path, detail)`` of the first problem (a kind of :func:`file_problems`), or None.
    """
    if not (osp.isfile(img_path) and osp.isfile(seg_path)):
        return None
    with Image.open(seg_path) as seg:
        seg_size, seg_format = seg.size, seg.format
    if seg_format in _LOSSY_FORMATS:
        return 'lossy', seg_path, f'{seg_format} data'
    with Image.open(img_path) as image:
        image_size, orientation = image.size, exif_orientation(image)
    loaded = (int(loaded_hw[1]), int(loaded_hw[0]))
    if loaded not in (image_size, image_size[::-1]):
        return None  # a loader that resizes: nothing to compare with
    if orientation in _SWAPS_SIDES and image_size[0] != image_size[1]:
        applies_orientation = loaded != image_size  # what the loader did is visible in the sizes
    problem = image_annotation_problem(image_size, orientation, seg_size, applies_orientation)
    if problem is None:
        return None
    return problem[0], img_path if problem[0].startswith('exif') else seg_path, problem[1]


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


def _suffixes(suffix: str | Sequence[str]) -> tuple[str, ...]:
    """A dataset's ``img_suffix`` as a tuple (``beit_mm.CustomSegDataset`` lists several, mmseg's datasets one)."""
    return (suffix, ) if isinstance(suffix, str) else tuple(suffix)


def _suffix_text(suffix: str | Sequence[str]) -> str:
    """``'.jpg'``, or ``'{.jpg,.png}'`` for several suffixes (a shell-like pattern for messages)."""
    suffixes = _suffixes(suffix)
    return suffixes[0] if len(suffixes) == 1 else '{' + ','.join(suffixes) + '}'


def _stem(path: str, suffix: str | Sequence[str]) -> str:
    for one in _suffixes(suffix):
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
        num_samples: pairs to decode (see the module docstring); None = all.
        progress: wraps the iteration over the decoded indices (a progress bar); None = plain.

    Returns:
        ``(errors, warnings)``: one message per kind of problem found (errors empty when the split is fine), and the
        warnings (at most one, about 255 beside class values: :func:`void_verdict`).
    """
    if not split.pairs:
        where = (f'{split.img_dir}/**/*{_suffix_text(split.img_suffix)}' if not split.from_ann_file
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
    """``(color_type, imdecode_backend)`` of the first mmcv ``LoadImageFromFile`` (or subclass) in a dataset's
    pipeline (mmcv's defaults ``('color', 'cv2')`` when there is none)."""
    for transform in getattr(getattr(dataset, 'pipeline', None), 'transforms', []):
        if isinstance(transform, LoadImageFromFile):
            return (str(getattr(transform, 'color_type', 'color')),
                    str(getattr(transform, 'imdecode_backend', 'cv2')))
    return 'color', 'cv2'


def split_info(dataset, name: str) -> SplitInfo:
    """Describe an mmseg ``BaseSegDataset`` (after ``full_init``) for :func:`check_split`.

    ``reduce_zero_label`` is the one mmseg's ``LoadAnnotations`` (or a subclass) in the pipeline uses (its own
    argument, else the dataset's); the class count is ``len(dataset.metainfo['classes'])``; the ignore index
    ``dataset.ignore_index``.
    """
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
    """``(where, num_classes)`` of every head of a built segmentor that predicts classes: ``decode_head`` and each
    ``auxiliary_head`` (mmseg's ``EncoderDecoder``; a list of auxiliary heads as ``auxiliary_head.<i>``), or the
    segmentor's own ``num_classes`` when it has no decode head (``beit_mm.EoMT``)."""
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

    A decode head with too few classes fails in the loss only on a label it lacks ("Target 3 is out of bounds"), one
    with too many, and any auxiliary head, trains silently on classes that never occur.

    Args:
        heads: ``(where, num_classes)`` (:func:`model_head_classes`, :func:`config_head_classes`).
        num_classes: the training set's class count.
        classes_path: the file the dataset read its names from (``beit_mm.CustomSegDataset``), if any.
    """
    wrong = [(where, n) for where, n in heads if n != num_classes]
    if not wrong:
        return None
    source = f'{classes_path} lists {num_classes}' if classes_path else 'metainfo classes'
    options = ' '.join(f'model.{where}={num_classes}' for where, _ in heads)
    other = (f'or list the {wrong[0][1]} classes the model predicts in {classes_path}' if classes_path else
             "or set the dataset's metainfo to the classes the model predicts")
    return (f'{", ".join(f"{where}={n}" for where, n in wrong)} but the training set has {num_classes} classes '
            f'({source}). Fix: --cfg-options {options} (or set them in the config), {other}')


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

    Datasets without ``seg_map_path`` entries (classification, MIM) are skipped. Warnings (255 that may be void
    pixels) are logged once per split.

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
        errors, warnings = check_split(split, num_samples, progress)
        messages += errors
        for warning in warnings:
            print_log(warning, logger='current', level=logging.WARNING)
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


def config_data_roots(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader', 'test_dataloader')
                      ) -> list[str]:
    """The folders a config's datasets read: every leaf dataset's ``data_root`` and its ``data_prefix`` folders
    (joined to the root), for the outputs check (:func:`beit_mm.fileio.outputs.check_output`: no output goes there).
    """
    found = []
    for loader in loaders:
        dataloader = cfg.get(loader)
        if not dataloader or not dataloader.get('dataset'):
            continue
        for ds in _dataset_cfgs(dataloader['dataset']):
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
    """Log (and return) a warning when the config's top-level ``data_root`` is read by none of the ``loaders``'
    datasets: ``--cfg-options data_root=X`` sets that variable after the config has copied it into the datasets, so
    the run would read the old root (silently, when it exists)."""
    top = cfg.get('data_root')
    roots = sorted({str(ds.get('data_root')) for loader in loaders if (cfg.get(loader) or {}).get('dataset')
                    for ds in _dataset_cfgs(cfg[loader]['dataset']) if ds.get('data_root')})
    if not isinstance(top, str) or not roots or top in roots:
        return None
    options = ' '.join(f'{name}.dataset.data_root={top}' for name in ('train_dataloader', 'val_dataloader',
                                                                      'test_dataloader'))
    message = (f"the config's data_root={top!r} is read by none of its datasets, which read {roots}: "
               '--cfg-options data_root=... only sets that variable, after the config copied it into the datasets. '
               f'Fix: set the datasets\' roots, --cfg-options {options}')
    print_log(message, logger='current', level=logging.WARNING)
    return message


def _check_image_folder(loader: str, ds: Mapping, img_path: str | None) -> None:
    """A classification or unlabeled dataset without ``ann_file`` (mmpretrain's ``CustomDataset``/``ImageNet``: class
    folders or a flat pool under ``data_root/data_prefix``) needs its folder; mmpretrain lists it with a bare
    ``FileNotFoundError`` from ``os.scandir``."""
    if img_path is None:
        return
    img_dir = osp.join(ds.get('data_root') or '', img_path)
    if not osp.isdir(img_dir):
        raise DatasetCheckError(
            f'[{loader}] the image folder {img_dir} does not exist. Fix: check data_root ({ds.get("data_root")!r}) '
            f'and data_prefix ({img_path!r}) of {loader}.dataset (--cfg-options {loader}.dataset.data_root=...); for '
            'demo data run python tools/make_demo_data.py (the config\'s header names the command of its data)')


def _check_det_split(loader: str, ds: Mapping, prefix: Mapping) -> None:
    """A dataset in mmdet's layout (``data_prefix`` with ``img``; COCO's ``ann_file``) needs its annotation file and
    every folder of its ``data_prefix``; mmdet fails on them with a bare ``FileNotFoundError`` or inside
    ``np.concatenate``."""
    root = ds.get('data_root') or ''
    wanted = [('annotation file', osp.join(root, ds['ann_file']), osp.isfile)] if ds.get('ann_file') else []
    wanted += [(f'{key} folder', osp.join(root, folder), osp.isdir) for key, folder in prefix.items()
               if isinstance(folder, str)]
    missing = [f'{what} {path}' for what, path, exists in wanted if not exists(path)]
    if missing:
        raise DatasetCheckError(
            f'[{loader}] not found: {"; ".join(missing)}. Fix: check data_root ({root!r}), ann_file and data_prefix '
            f'of {loader}.dataset (--cfg-options {loader}.dataset.data_root=...); for demo data run python '
            'tools/make_demo_data.py (the config\'s header names the command of its data)')


def check_split_folders(cfg, loaders: Sequence[str] = ('train_dataloader', 'val_dataloader')) -> None:
    """Before the datasets are built: every segmentation split's image folder exists and holds an image.

    MMEngine's ``BaseDataset`` fails on an empty split inside ``np.concatenate`` ("need at least one array to
    concatenate") and on a missing folder with a bare ``FileNotFoundError``; ``tools/train.py`` and
    ``tools/analysis/check_dataset.py`` call this first. Splits listed by an ``ann_file`` are not checked here.

    Raises:
        DatasetCheckError: names the folder, the suffix looked for and the fix.
    """
    warn_unread_data_root(cfg, loaders)
    scope = cfg.get('default_scope')
    for loader in loaders:
        dataloader = cfg.get(loader)
        if not dataloader or not dataloader.get('dataset'):
            continue
        for ds in _dataset_cfgs(dataloader['dataset']):
            prefix = ds.get('data_prefix') or {}
            if isinstance(prefix, Mapping) and 'img' in prefix:  # mmdet's layout: COCO, beit_mm.ADE20KPanopticDataset
                _check_det_split(loader, ds, prefix)
                continue
            if ds.get('ann_file'):
                continue
            if isinstance(prefix, str) or 'seg_map_path' not in prefix:  # mmpretrain: class folders, unlabeled pools
                _check_image_folder(loader, ds, prefix if isinstance(prefix, str) else prefix.get('img_path'))
                continue
            img_dir = osp.join(ds.get('data_root') or '', prefix.get('img_path', ''))
            suffix = _suffixes(ds.get('img_suffix') or _default_argument(ds['type'], 'img_suffix', scope) or '')
            fix = (f'Fix: check data_root ({ds.get("data_root")!r}) and data_prefix.img_path '
                   f'({prefix.get("img_path")!r}) of {loader}.dataset (--cfg-options {loader}.dataset.data_root=...); '
                   'for the demo data run python tools/make_demo_data.py')
            if not osp.isdir(img_dir):
                raise DatasetCheckError(f'[{loader}] the image folder {img_dir} does not exist. {fix}')
            if not _has_file(img_dir, suffix):
                raise DatasetCheckError(f'[{loader}] the split is empty: no image matched '
                                        f'{img_dir}/**/*{_suffix_text(suffix)}. {fix}, and img_suffix '
                                        f'({suffix[0] if len(suffix) == 1 else suffix!r})')
