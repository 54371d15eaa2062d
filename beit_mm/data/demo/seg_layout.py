"""The writer shared by the demo generators of mmseg's dataset layouts (:mod:`beit_mm.data.demo.coco_stuff`,
:mod:`beit_mm.data.demo.pascal_context`, :mod:`beit_mm.data.demo.cityscapes`): a layout is a list of (image, label
map) paths per split and a few text files (split lists); the pixels are the ADE20K demo's drawings
(:func:`beit_mm.data.demo.make_classes_sample`: every class its own colour and texture, some void regions), with the
mask value each dataset stores for the demo's classes.

Ownership as :func:`beit_mm.data.demo.custom.make_demo_custom`: the root must be new, empty or carry this generator's
marker and journal (:func:`beit_mm.data.demo.root.open_demo_root`); a second call with the same arguments rewrites
nothing; every file is journaled, then written through a temporary file and a rename, and only files the journal lists
with their present content are replaced or removed (:class:`beit_mm.data.demo.root.GeneratedTree`).
"""
from __future__ import annotations

import os.path as osp
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root
from .ade20k import DEMO_CLASSES, make_classes_sample

# the ADE20K demo's drawn classes by name (its colour and texture), for the layouts' own mask values
DEMO_LOOKS = {name: (colour, texture) for name, colour, texture in DEMO_CLASSES.values()}


def demo_classes(values: Mapping[str, int]) -> dict[int, tuple[str, tuple[int, int, int], str]]:
    """``{stored mask value: (demo name, colour, texture)}`` for ``{demo name: stored mask value}``: the ADE20K demo's
    appearance of each named class (``sky``, ``grass``, ``car``, ``road``, ``tree``, ``wall``, ``water``, ``floor``)
    under the value another dataset stores for it."""
    return {value: (name, *DEMO_LOOKS[name]) for name, value in values.items()}


@dataclass(frozen=True)
class SegDemoLayout:
    """What one call of a layout's generator writes, relative to its root.

    pairs: ``{split: [(image path, label-map path), ...]}`` in writing order.
    texts: ``{path: content}``: split lists and the like, written after the images.
    unlisted: images that no split lists (Pascal Context's VOC2010 ``JPEGImages`` holds them), drawn as the others.
    """
    pairs: Mapping[str, Sequence[tuple[str, str]]]
    texts: Mapping[str, str] = field(default_factory=dict)
    unlisted: Sequence[str] = ()

    def files(self) -> list[str]:
        return ([p for pairs in self.pairs.values() for pair in pairs for p in pair] + list(self.unlisted) +
                list(self.texts))


def write_seg_demo(root: str, generator: str, arguments: dict, layout: SegDemoLayout,
                   classes: Mapping[int, tuple[str, tuple[int, int, int], str]], void: int, size: int, seed: int,
                   width_factor: int = 1) -> str:
    """Write ``layout`` under ``root``: images ``size`` high and ``width_factor * size`` wide (side by side drawings),
    RGB, JPEG (quality 92) or PNG as the suffix says; label maps single-channel uint8 PNG with ``classes``' keys and
    ``void``. Returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files (a real dataset, another generator's demo); nothing written.
    """
    expected = layout.files()
    tree = open_demo_root(root, generator, arguments, expected)
    if tree.mode == KEEP or (tree.mode == UPDATE and tree.complete(expected)):
        return root
    tree.remove_stale(expected)  # the generator's files of other arguments (only those: the journal lists them)
    rng = np.random.default_rng(seed)
    images = [(split, pair) for split, pairs in layout.pairs.items() for pair in pairs]
    images += [('unlisted', (path, None)) for path in layout.unlisted]
    split_rngs: dict[str, np.random.Generator] = {}
    for split, (img_path, seg_path) in images:
        split_rng = split_rngs.setdefault(split, np.random.default_rng(rng.integers(2**32)))
        drawn = [make_classes_sample(size, split_rng, dict(classes), void=void) for _ in range(width_factor)]
        image = np.concatenate([d[0] for d in drawn], axis=1)
        label_map = np.concatenate([d[1] for d in drawn], axis=1)
        extra = dict(quality=92) if img_path.endswith('.jpg') else {}
        tree.save_image(img_path, Image.fromarray(image), **extra)
        if seg_path is not None:
            tree.save_image(seg_path, Image.fromarray(label_map, mode='L'))
    for path, text in layout.texts.items():
        tree.write_text(path, text)
    tree.finish()
    return root

