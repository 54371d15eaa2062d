"""A tiny synthetic set in ADE20K's panoptic layout, the COCO demo's drawings with ADE20K's classes."""
from __future__ import annotations

import os.path as osp

import numpy as np
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root
from ..datasets.ade20k_panoptic import THINGS
from .coco import COCO_DEMO_CATEGORIES, make_coco_sample

SPLITS = (('training', 'train'), ('validation', 'val'))
#: COCO demo category id -> ADE20K class index (the PNG stores index + 1).
ADE20K_OF_COCO = {1: 12, 3: 20, 149: 6, 187: 2, 193: 9}


def ade20k_panoptic_demo_files(num_train: int, num_val: int) -> dict[str, list[tuple[str, str, str]]]:
    """``{split: [(image, semantic PNG, instance PNG), ...]}`` relative to the root."""
    layout = {}
    for (split, short), count in zip(SPLITS, (num_train, num_val)):
        stems = [f'ADE_{short}_{i:08d}' for i in range(1, count + 1)]
        layout[split] = [(osp.join('images', split, s + '.jpg'), osp.join('annotations', split, s + '.png'),
                          osp.join('annotations_instance', split, s + '.png')) for s in stems]
    return layout


def ade20k_maps(segment_map: np.ndarray, segments: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """A COCO demo sample's segment map and segments -> ADE20K's semantic (H, W) and instance (H, W, 3) PNGs."""
    semantic = np.zeros(segment_map.shape, np.uint8)
    instance = np.zeros(segment_map.shape + (3, ), np.uint8)
    count = 0
    for segment in segments:
        mask = segment_map == segment['id']
        index = ADE20K_OF_COCO[segment['category_id']]
        semantic[mask] = index + 1
        if COCO_DEMO_CATEGORIES[segment['category_id']][1]:  # a thing
            count += 1
            instance[mask] = (THINGS.index(index) + 1, count, 0)
    return semantic, instance


def make_demo_ade20k_panoptic(root: str, num_train: int = 40, num_val: int = 10, size: int = 64,
                              seed: int = 0) -> str:
    """Write the ADE20K panoptic demo under ``root``; a second call with the same arguments rewrites nothing.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    layout = ade20k_panoptic_demo_files(num_train, num_val)
    expected = [p for rows in layout.values() for row in rows for p in row]
    arguments = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)
    tree = open_demo_root(root, 'beit_mm.data.demo_ade20k_panoptic.make_demo_ade20k_panoptic', arguments, expected)
    if tree.mode == KEEP or (tree.mode == UPDATE and tree.complete(expected)):
        return root
    tree.remove_stale(expected)
    rng = np.random.default_rng(seed)
    for split, _ in SPLITS:
        split_rng = np.random.default_rng(rng.integers(2**32))
        for image_path, semantic_path, instance_path in layout[split]:
            image, segment_map, segments = make_coco_sample(size, size + size // 2, split_rng)
            semantic, instance = ade20k_maps(segment_map, segments)
            tree.save_image(image_path, Image.fromarray(image), quality=92)
            tree.save_image(semantic_path, Image.fromarray(semantic))
            tree.save_image(instance_path, Image.fromarray(instance))
    tree.finish()
    return root
