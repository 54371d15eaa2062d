"""Your own semantic-segmentation set: images and class-index masks in one folder, the class names beside them.

Layout (``data_root``)::

    ROOT/classes.txt                      one class name per line; line i (0-based) names the mask value i
    ROOT/palette.txt                      optional: "R G B" per line, one per class, for drawing predictions
    ROOT/images/{train,val}/<any name>.jpg|.png   (.jpeg and upper-case suffixes too; sub-folders allowed)
    ROOT/masks/{train,val}/<same name>.png        single-channel uint8 class indices 0..N-1, 255 = ignored

No 0 = "other" convention: every value below N is a class. The class files are checked when the dataset is built.
"""
from __future__ import annotations

import os.path as osp
from typing import Sequence

from mmengine import fileio
from mmseg.datasets import BaseSegDataset

from ...fileio.names import check_name
from ...fileio.text_file import TextFileError, read_text_lines
from ...registry import DATASETS
from ..checks import DatasetCheckError

CLASSES_FILE = 'classes.txt'
PALETTE_FILE = 'palette.txt'
IMG_SUFFIXES = ('.jpg', '.jpeg', '.png', '.JPG', '.JPEG', '.PNG')


def read_classes(path: str) -> tuple[str, ...]:
    """The class names of ``path``, one per line, index = mask value; trailing blank lines dropped.

    Raises:
        DatasetCheckError: the file is missing, unreadable or empty, has a blank line among the names, repeats a
            name, or a name holds control characters.
    """
    fix_missing = (f'write {path} with one class name per line, in the order of the mask values (line 1 names value '
                   f'0, line 2 value 1, ...), or point data_root at the folder that holds it')
    try:
        lines = read_text_lines(path)
    except FileNotFoundError:
        raise DatasetCheckError(f'{path} does not exist: the dataset reads its class names from it. Fix: '
                                f'{fix_missing}') from None
    except TextFileError as error:
        raise DatasetCheckError(f'{error} (the class names of the dataset)') from None
    while lines and not lines[-1].strip():
        lines.pop()
    names = [check_name(line.strip(), path, f'line {i + 1}', DatasetCheckError) for i, line in enumerate(lines)]
    if not names:
        raise DatasetCheckError(f'{path} lists no class names (the file is empty). Fix: {fix_missing}')
    blank = [i + 1 for i, name in enumerate(names) if not name]
    if blank:
        raise DatasetCheckError(
            f'{path} has blank line(s) among the class names: line(s) {blank[:10]}; a blank line would be a class '
            'without a name and shift every class after it by one. Fix: delete the blank lines if they are not '
            'classes, or name the class of that mask value')
    seen: dict[str, int] = {}
    repeats = []
    for i, name in enumerate(names):
        if name in seen:
            repeats.append(f'{name!r} on lines {seen[name] + 1} and {i + 1}')
        else:
            seen[name] = i
    if repeats:
        raise DatasetCheckError(
            f'{path} names a class twice: {"; ".join(repeats[:5])}. Two mask values with one name cannot be told '
            'apart in the per-class results. Fix: give every mask value its own name (merge the two classes in the '
            'masks first if they are one class)')
    return tuple(names)


def read_palette(path: str, num_classes: int) -> list[list[int]] | None:
    """The palette of ``path`` (``R G B`` per line, one per class), or None when there is no such file.

    Raises:
        DatasetCheckError: the file is unreadable, a line is not three integers in 0..255, or it has another number
            of lines than there are classes.
    """
    if not osp.isfile(path):
        return None
    try:
        lines = read_text_lines(path)
    except TextFileError as error:
        raise DatasetCheckError(f'{error} (the palette of the dataset)') from None
    while lines and not lines[-1].strip():
        lines.pop()
    palette, bad = [], []
    for i, line in enumerate(lines):
        parts = line.replace(',', ' ').split()
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() and int(p) <= 255 for p in parts):
            bad.append(f'line {i + 1}: {line!r}')
            continue
        palette.append([int(p) for p in parts])
    if bad:
        raise DatasetCheckError(f'{path} has line(s) that are not an "R G B" triple of integers 0..255: '
                                f'{"; ".join(bad[:5])}. Fix: write one "R G B" line per class, e.g. "128 64 0"')
    if len(palette) != num_classes:
        raise DatasetCheckError(f'{path} has {len(palette)} colour(s) but {num_classes} classes are listed in '
                                f'{osp.join(osp.dirname(path), CLASSES_FILE)}. Fix: one "R G B" line per class, in '
                                'the same order, or delete the palette file (a fixed random palette is used then)')
    return palette


def _strip_suffix(name: str, suffixes: Sequence[str]) -> str:
    for suffix in suffixes:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return osp.splitext(name)[0]


@DATASETS.register_module()
class CustomSegDataset(BaseSegDataset):
    """A semantic-segmentation set in the layout of the module docstring, its classes read from ``data_root``.

    Args:
        data_root: the folder holding ``classes.txt``, ``images/`` and ``masks/``.
        classes_file, palette_file: relative to ``data_root``.
        img_suffix: image suffixes listed.
        seg_map_suffix: the mask suffix.
        reduce_zero_label: True only for masks with ADE20K's 0 = "other".
        **kwargs: :class:`mmseg.datasets.BaseSegDataset`'s arguments, without ``metainfo['classes']``.

    Attributes:
        classes_path: the class-name file read.
    """

    def __init__(self,
                 data_root: str,
                 classes_file: str = CLASSES_FILE,
                 palette_file: str = PALETTE_FILE,
                 img_suffix: str | Sequence[str] = IMG_SUFFIXES,
                 seg_map_suffix: str = '.png',
                 reduce_zero_label: bool = False,
                 metainfo: dict | None = None,
                 **kwargs) -> None:
        if metainfo and 'classes' in metainfo:
            raise DatasetCheckError(f'CustomSegDataset reads its classes from {osp.join(data_root, classes_file)}, '
                                    f'but metainfo gives classes too ({list(metainfo["classes"])[:5]}...). Fix: drop '
                                    'metainfo.classes and list the names in the classes file')
        self.classes_path = osp.join(data_root, classes_file)
        classes = read_classes(self.classes_path)
        palette = read_palette(osp.join(data_root, palette_file), len(classes))
        info = dict(metainfo or {}, classes=classes, **({'palette': palette} if palette is not None else {}))
        super().__init__(data_root=data_root, img_suffix=tuple(img_suffix) if not isinstance(img_suffix, str)
                         else img_suffix, seg_map_suffix=seg_map_suffix, reduce_zero_label=reduce_zero_label,
                         metainfo=info, **kwargs)

    def load_data_list(self) -> list[dict]:
        """mmseg's folder listing with several image suffixes, sorted by image path."""
        if self.ann_file and not osp.isdir(self.ann_file):
            return super().load_data_list()
        suffixes = (self.img_suffix, ) if isinstance(self.img_suffix, str) else tuple(self.img_suffix)
        img_dir = self.data_prefix.get('img_path', None)
        ann_dir = self.data_prefix.get('seg_map_path', None)
        data_list = []
        for img in fileio.list_dir_or_file(dir_path=img_dir, list_dir=False, suffix=suffixes, recursive=True,
                                           backend_args=self.backend_args):
            data_info = dict(img_path=osp.join(img_dir, img))
            if ann_dir is not None:
                data_info['seg_map_path'] = osp.join(ann_dir, _strip_suffix(img, suffixes) + self.seg_map_suffix)
            data_info['label_map'] = self.label_map
            data_info['reduce_zero_label'] = self.reduce_zero_label
            data_info['seg_fields'] = []
            data_list.append(data_info)
        return sorted(data_list, key=lambda x: x['img_path'])
