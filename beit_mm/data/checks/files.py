"""One image/annotation pair: decodable, single-channel, the sizes as the loaders return them, and the label values."""
from __future__ import annotations

import os.path as osp
from collections.abc import Sequence

import numpy as np
from PIL import Image

from .labels import LabelRule, check_label_values

# EXIF orientation tag; 5..8 swap width and height
EXIF_ORIENTATION = 0x0112
ORIENTATIONS = {2: 'mirrored', 3: 'rotated 180 degrees', 4: 'flipped upside down', 5: 'mirrored and rotated 90 degrees',
                6: 'rotated 90 degrees clockwise', 7: 'mirrored and rotated 270 degrees',
                8: 'rotated 90 degrees counter-clockwise'}
_SWAPS_SIDES = (5, 6, 7, 8)
# color_type values and backends of mmcv's LoadImageFromFile that apply the tag
_ORIENTING_COLOR_TYPES = ('color', 'grayscale')
_ORIENTING_BACKENDS = ('cv2', 'pillow')
_LOSSY_FORMATS = ('JPEG', 'MPO')


def exif_orientation(image: Image.Image) -> int:
    """The EXIF orientation tag of an opened image (1 = upright, also when there is no tag or no EXIF)."""
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 -- a malformed EXIF block: PIL raises various errors; the loader ignores it too
        return 1
    return int(value) if isinstance(value, int) and value in range(1, 9) else 1


def loader_applies_orientation(color_type: str = 'color', imdecode_backend: str = 'cv2') -> bool:
    """Whether mmcv's ``LoadImageFromFile`` applies an image's EXIF orientation."""
    return color_type in _ORIENTING_COLOR_TYPES and imdecode_backend in _ORIENTING_BACKENDS


def loaded_size(stored: tuple[int, int], orientation: int, applies_orientation: bool) -> tuple[int, int]:
    """``(W, H)`` of an image as the loader returns it, from its stored ``(W, H)`` and orientation tag."""
    if applies_orientation and orientation in _SWAPS_SIDES:
        return stored[1], stored[0]
    return stored


def _decode(path: str) -> Image.Image:
    """Open and fully decode ``path`` (a regular file within the pixel limit)."""
    from ...fileio.inputs import open_image
    return open_image(path)


def _size(size: tuple[int, int]) -> str:
    return f'{size[0]}x{size[1]}'


def image_annotation_problem(image_size: tuple[int, int], orientation: int, seg_size: tuple[int, int],
                             applies_orientation: bool = True) -> tuple[str, str] | None:
    """The size/orientation problem of one pair: ``(kind, detail)`` or None.

    Args:
        image_size, seg_size: the stored ``(W, H)`` of the image and the annotation (never rotated).
        orientation: the image's EXIF orientation tag (1 = none).
        applies_orientation: whether the pipeline's loader applies the tag.
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
        ``(problems, values)``: ``(kind, path, detail)`` triples and the annotation's distinct values (or None).
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
    """Check a pair as the pipeline loaded it from the two files' headers; ``(kind, path, detail)`` or None.

    Args:
        img_path, seg_path: the pair (local files; anything else is skipped).
        loaded_hw: ``(H, W)`` of the image as loaded (``ori_shape``).
        applies_orientation: whether the pipeline's loader applies EXIF orientation tags.
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
