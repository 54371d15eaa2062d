"""A small synthetic dataset in ADE20K's layout (raw labels: 0 = "other", 1..150 the classes), and a check of ADE20K
label maps."""
import glob
import os.path as osp
from functools import partial
from typing import Dict, List, Optional, Tuple

import colorsys

import numpy as np
from PIL import Image

from .imagenet import SHAPES, TEXTURES, shape_mask, texture
from .digits import make_digits_sample
from .root import KEEP, UPDATE, open_demo_root
from .root import save_demo_image as _save_in_tree
from ...fileio.inputs import open_image

ADE20K_NUM_CLASSES = 150  # raw masks: 0 = other, 1..150 = classes; reduce_zero_label maps 0 -> 255, k -> k - 1
_SPLITS = (('training', 'train'), ('validation', 'val'))

# Raw ADE20K class id -> (name, base RGB colour, texture).
DEMO_CLASSES: Dict[int, Tuple[str, Tuple[int, int, int], str]] = {
    1: ('wall', (205, 195, 170), 'flat'),
    3: ('sky', (115, 170, 240), 'vgradient'),
    4: ('floor', (150, 100, 55), 'checker'),
    5: ('tree', (30, 110, 40), 'speckle'),
    7: ('road', (90, 90, 95), 'hstripes'),
    10: ('grass', (95, 195, 60), 'vstripes'),
    21: ('car', (210, 30, 40), 'flat'),
    22: ('water', (30, 60, 165), 'diagonal'),
}


def _texture(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    if kind == 'flat':
        return np.zeros((size, size), np.float32)
    if kind == 'vgradient':
        return 1.0 - 2.0 * yy / max(size - 1, 1)
    if kind == 'checker':
        return np.where(((yy // 8) + (xx // 8)) % 2 == 0, 1.0, -1.0).astype(np.float32)
    if kind == 'speckle':
        return rng.uniform(-1.0, 1.0, (size, size)).astype(np.float32)
    if kind == 'hstripes':
        return np.sign(np.sin(yy * np.pi / 4.0)).astype(np.float32)
    if kind == 'vstripes':
        return np.sign(np.sin(xx * np.pi / 3.0)).astype(np.float32)
    if kind == 'diagonal':
        return np.sin((xx + yy) * np.pi / 6.0).astype(np.float32)
    raise ValueError(f'unknown texture {kind!r}; use one of flat, vgradient, checker, speckle, hstripes, vstripes, '
                     'diagonal')


def _class_appearance(label: int, size: int, rng: np.random.Generator,
                      classes: Dict[int, Tuple[str, Tuple[int, int, int], str]] = DEMO_CLASSES) -> np.ndarray:
    """The (size, size, 3) float32 RGB appearance of a class; a label outside ``classes`` gets a random colour."""
    if label not in classes:
        return np.broadcast_to(rng.uniform(0, 255, 3).astype(np.float32), (size, size, 3)).copy()
    _, colour, kind = classes[label]
    return np.asarray(colour, np.float32) + 30.0 * _texture(kind, size, rng)[..., None]


def _random_region(size: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean (size, size) rectangle, ellipse or blob covering roughly 6-35% of the canvas."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    shape = rng.integers(3)
    if shape == 0:
        h, w = rng.integers(size // 4, size // 2 + 1, 2)
        y0, x0 = rng.integers(0, size - h + 1), rng.integers(0, size - w + 1)
        return (yy >= y0) & (yy < y0 + h) & (xx >= x0) & (xx < x0 + w)
    if shape == 1:
        cy, cx = rng.uniform(0.2 * size, 0.8 * size, 2)
        ry, rx = rng.uniform(size / 8, size / 4, 2)
        return ((yy - cy) / ry)**2 + ((xx - cx) / rx)**2 <= 1.0
    field = np.zeros((size, size), np.float32)
    centre = rng.uniform(0.25 * size, 0.75 * size, 2)
    for _ in range(4):
        cy, cx = centre + rng.normal(0, size / 10, 2)
        sigma = rng.uniform(size / 12, size / 7)
        field += np.exp(-((yy - cy)**2 + (xx - cx)**2) / (2 * sigma**2))
    return field > 0.5


def make_classes_sample(size: int, rng: np.random.Generator,
                 classes: Dict[int, Tuple[str, Tuple[int, int, int], str]] = DEMO_CLASSES,
                 void: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """One RGB image and its label map: a background class with 2-4 regions of other ``classes``, sometimes over a
    ``void`` region."""
    labels = list(classes)
    background = int(rng.choice(labels))
    label_map = np.full((size, size), background, np.uint8)
    image = _class_appearance(background, size, rng, classes)
    others = [c for c in labels if c != background]
    count = rng.integers(2, min(5, len(others) + 1))
    regions = [(int(c), _random_region(size, rng)) for c in rng.choice(others, count, replace=False)]
    if rng.random() < 0.4:
        regions.insert(0, (void, _random_region(size, rng)))
    for label, region in regions:
        label_map[region] = label
        image[region] = _class_appearance(label, size, rng, classes)[region]
    image += rng.normal(0.0, 6.0, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), label_map


# 'shapes' style: raw ADE20K-convention ids 1..7 (0 = "other" is not used).
SHAPE_CLASSES: Tuple[str, ...] = ('background', ) + SHAPES
SHAPE_RADIUS = (0.2, 0.32)
SHAPES_PER_IMAGE = (1, 3)
MIN_COLOUR_DISTANCE = 60.0


def _random_colour(rng: np.random.Generator) -> np.ndarray:
    r, g, b = colorsys.hsv_to_rgb(rng.random(), rng.uniform(0.3, 1.0), rng.uniform(0.35, 1.0))
    return 255.0 * np.array([r, g, b], np.float32)


def _random_appearance(size: int, avoid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    colour = _random_colour(rng)
    while np.linalg.norm(colour - avoid) < MIN_COLOUR_DISTANCE:
        colour = _random_colour(rng)
    kind = TEXTURES[rng.integers(len(TEXTURES))]
    return colour + 30.0 * texture(kind, size)[..., None]


def _make_shapes_sample(size: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """One 'shapes' RGB image and its raw label map (1 = background, 1 + k = ``SHAPES[k]``)."""
    background = np.full(3, rng.uniform(60, 190), np.float32)
    image = np.broadcast_to(background, (size, size, 3)).copy()
    label_map = np.ones((size, size), np.uint8)
    for _ in range(rng.integers(SHAPES_PER_IMAGE[0], SHAPES_PER_IMAGE[1] + 1)):
        k = int(rng.integers(len(SHAPES)))
        radius = rng.uniform(*SHAPE_RADIUS) * size
        cy, cx = rng.uniform(radius, size - radius, 2)
        region = shape_mask(SHAPES[k], size, cy, cx, radius)
        label_map[region] = 2 + k
        image[region] = _random_appearance(size, background, rng)[region]
    image += rng.normal(0.0, 6.0, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), label_map


SAMPLERS = {
    'classes': make_classes_sample,
    'shapes': _make_shapes_sample,
    'digits': make_digits_sample,
    'digits-dark': partial(make_digits_sample, ink='dark'),
}
# styles whose splits draw from separate pools (``sampler(size, rng, split)``): the digits' glyphs
SPLIT_STYLES = ('digits', 'digits-dark')


def _has_files(directory: str, pattern: str, count: int) -> bool:
    return len(glob.glob(osp.join(directory, pattern))) == count


def demo_ade20k_files(num_train: int, num_val: int, with_annotations: bool = True) -> List[str]:
    """Relative paths of the files :func:`make_demo_ade20k` writes under its root (its marker aside)."""
    files = []
    for (split, prefix), count in zip(_SPLITS, (num_train, num_val)):
        stems = [f'ADE_{prefix}_{index:08d}' for index in range(1, count + 1)]
        files += [osp.join('images', split, stem + '.jpg') for stem in stems]
        files += [osp.join('annotations', split, stem + '.png') for stem in stems] if with_annotations else []
    return files


def save_demo_image(image: Image.Image, path: str, **kwargs) -> None:
    """Save ``image`` at ``path`` in a claimed demo root, in the format its suffix names."""
    _save_in_tree(image, path, **kwargs)


def make_demo_ade20k(root: str,
                     num_train: int = 200,
                     num_val: int = 40,
                     size: int = 128,
                     seed: int = 0,
                     style: str = 'classes',
                     with_annotations: bool = True) -> str:
    """Write ``root/images/{training,validation}/ADE_*.jpg`` and ``root/annotations/.../ADE_*.png``; skip what is
    complete.

    Args:
        root: dataset root: new, empty, or one this function wrote.
        num_train, num_val: images per split.
        size: image side in pixels.
        seed: the same arguments give the same files.
        style: ``'classes'`` (colour names the class), ``'shapes'`` (the outline does), ``'digits'`` or
            ``'digits-dark'`` (handwritten digits; needs scikit-learn).
        with_annotations: also write the label maps.

    Returns:
        ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    if style not in SAMPLERS:
        raise ValueError(f'unknown demo style {style!r}; use one of {sorted(SAMPLERS)}')
    arguments = dict(num_train=num_train, num_val=num_val, size=size, seed=seed, style=style,
                     with_annotations=with_annotations)
    expected = demo_ade20k_files(num_train, num_val, with_annotations)
    tree = open_demo_root(root, 'beit_mm.data.demo.make_demo_ade20k', arguments, expected)
    if tree.mode == KEEP:
        return root
    rng = np.random.default_rng(seed)
    for (split, prefix), count in zip(_SPLITS, (num_train, num_val)):
        split_rng = np.random.default_rng(rng.integers(2**32))
        stems = [f'ADE_{prefix}_{index:08d}' for index in range(1, count + 1)]
        images = [f'images/{split}/{stem}.jpg' for stem in stems]
        labels = [f'annotations/{split}/{stem}.png' for stem in stems] if with_annotations else []
        if tree.mode == UPDATE and tree.complete(images + labels):  # other arguments: every split is drawn again
            continue
        for index in range(count):
            image, label_map = SAMPLERS[style](size, split_rng, *((split, ) if style in SPLIT_STYLES else ()))
            tree.save_image(images[index], Image.fromarray(image), quality=92)
            if with_annotations:
                tree.save_image(labels[index], Image.fromarray(label_map, mode='L'))
    tree.remove_stale(expected)
    tree.finish()
    return root


def check_ade20k_labels(root: str, max_files: Optional[int] = None) -> Dict[int, int]:
    """Check that ``root/annotations/{training,validation}/*.png`` hold raw ADE20K label maps.

    Args:
        root: dataset root.
        max_files: check only the first ``max_files`` masks of each split.

    Returns:
        ``{value: pixel count}`` of every label value found.

    Raises:
        FileNotFoundError: no masks under ``root/annotations``.
        DatasetCheckError: an RGB mask, a 0/255 binary map, a reduced mask (255 present) or values above 150.
    """
    from ..checks import (DatasetCheckError, LabelRule, Problem, check_label_values,  # (kept local: merge-friendly)
                         label_problems)
    rule = LabelRule(num_classes=ADE20K_NUM_CLASSES, reduce_zero_label=True)
    reduced = Problem('annotation(s) containing 255 beside class values, which raw ADE20K masks (0..150) never hold: '
                      'they look already reduced (0 -> 255, k -> k - 1)',
                      'use the raw masks, or set reduce_zero_label=False in the dataset and in LoadAnnotations')
    counts: Dict[int, int] = {}
    n_files = 0
    for split, _ in _SPLITS:
        paths = sorted(glob.glob(osp.join(root, 'annotations', split, '*.png')))[:max_files]
        for path in paths:
            n_files += 1
            mask = np.asarray(open_image(path))  # palette PNGs give their indices
            values, value_counts = np.unique(mask, return_counts=True)
            problem = ('colour', f'shape {mask.shape}') if mask.ndim != 2 else check_label_values(values.tolist(),
                                                                                                  rule)
            if problem is None and rule.ignore_index in values:
                problem = ('reduced', f'255 beside {sorted(set(values.tolist()) - {rule.ignore_index})[:6]}')
            if problem is not None:
                report = reduced if problem[0] == 'reduced' else label_problems(rule)[problem[0]]
                report.add(path, problem[1])
                raise DatasetCheckError(report.message(split))
            for value, count in zip(values.tolist(), value_counts.tolist()):
                counts[value] = counts.get(value, 0) + count
    if n_files == 0:
        raise FileNotFoundError(f'no label maps under {root}/annotations/{{training,validation}}/*.png; expected the '
                                'ADEChallengeData2016 layout (or run tools/make_demo_data.py for demo data).')
    return counts
