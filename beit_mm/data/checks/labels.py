"""Label conventions of a segmentation split and the problems a check reports, each with its files and fix.

With ``reduce_zero_label=True`` mmseg maps 0 -> 255 (ignored) and k -> k - 1; a 255 beside class values is an error
only where the masks are certainly reduced already, else one warning.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ...fileio.names import shown

MAX_NAMED_FILES = 5
DETAIL_CHARS = 400  # the most characters of one file's detail (an error message) printed


class DatasetCheckError(ValueError):
    """A dataset failed :func:`check_seg_dataset`; the message lists every problem with files, count and fix."""


@dataclass(frozen=True)
class LabelRule:
    """What label values a split may hold on disk.

    Args:
        num_classes: classes the model predicts (after ``reduce_zero_label``).
        reduce_zero_label: whether the loader maps 0 -> ignore and k -> k - 1.
        ignore_index: the ignored value after loading (255 in mmseg).
        classes_source: where the class names come from, for the fixes.
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
        named = [f'{shown(f)} ({shown(d, DETAIL_CHARS)})' if d else shown(f)
                 for f, d in zip(self.files[:MAX_NAMED_FILES], self.details[:MAX_NAMED_FILES])]
        more = f' and {len(self.files) - len(named)} more' if len(self.files) > len(named) else ''
        return f'[{split}] {len(self.files)} {self.what}: {", ".join(named)}{more}. Fix: {self.fix}'


def file_problems() -> dict[str, Problem]:
    """A fresh, empty :class:`Problem` for every problem of files, pairing, sizes and encoding."""
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
    """The problem with one annotation's distinct raw ``values`` under ``rule``: ``(kind, detail)``, or None."""
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
        ``'reduced'`` (255 present, no 0, largest value ``num_classes - 1``); ``'void'`` for any other 255 beside
        class values under ``reduce_zero_label=True``; None when there is nothing to say.
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
    named = ', '.join(map(shown, files[:MAX_NAMED_FILES])) + (f' and {len(files) - MAX_NAMED_FILES} more'
                                                  if len(files) > MAX_NAMED_FILES else '')
    return (f'[{split}] {len(files)} annotation(s) hold 255 beside class values ({named}). With reduce_zero_label=True '
            f'mmseg keeps a raw 255 as {rule.ignore_index} (ignored, like the raw 0 = "other") and maps k -> k - 1, '
            'so these pixels are treated as void and left out of the loss. If the masks were instead reduced offline '
            '(0 -> 255, k -> k - 1), every class would be shifted twice: then set reduce_zero_label=False in the '
            'dataset and in LoadAnnotations.')
