"""The writer shared by the demo generators of mmseg's dataset layouts: (image, label map) paths per split and a few
text files, the pixels the ADE20K demo's drawings under each dataset's mask values."""
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
    """``{stored mask value: (demo name, colour, texture)}`` for ``{demo name: stored mask value}``."""
    return {value: (name, *DEMO_LOOKS[name]) for name, value in values.items()}


@dataclass(frozen=True)
class SegDemoLayout:
    """What one call of a layout's generator writes, relative to its root: image/label pairs per split, text files,
    and images no split lists."""
    pairs: Mapping[str, Sequence[tuple[str, str]]]
    texts: Mapping[str, str] = field(default_factory=dict)
    unlisted: Sequence[str] = ()

    def files(self) -> list[str]:
        return ([p for pairs in self.pairs.values() for pair in pairs for p in pair] + list(self.unlisted) +
                list(self.texts))


def write_seg_demo(root: str, generator: str, arguments: dict, layout: SegDemoLayout,
                   classes: Mapping[int, tuple[str, tuple[int, int, int], str]], void: int, size: int, seed: int,
                   width_factor: int = 1) -> str:
    """Write ``layout`` under ``root``, images ``size`` x ``width_factor * size``; returns ``root``.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    expected = layout.files()
    tree = open_demo_root(root, generator, arguments, expected)
    if tree.mode == KEEP or (tree.mode == UPDATE and tree.complete(expected)):
        return root
    tree.remove_stale(expected)
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

