"""A tiny synthetic set in COCO's panoptic and instance layout, as mmdet's ``CocoPanopticDataset`` and
``CocoDataset`` read it::

    root/{train,val}2017/<image id>.jpg                     image ids continue over the splits
    root/annotations/panoptic_{train,val}2017.json
    root/annotations/panoptic_{train,val}2017/<id>.png      RGB segment ids, 0 = void
    root/annotations/instances_{train,val}2017.json         RLE instances of the thing classes

The things person and car (1-3 instances per image) lie on the stuff sky over road or grass; labels as mmdet's,
things first.
"""
from __future__ import annotations

import json
import os.path as osp

import numpy as np
import pycocotools.mask as mask_utils
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root
from ..datasets.coco_panoptic import id2rgb
from .ade20k import _texture

SPLITS = ('train', 'val')
# COCO category id -> (name, isthing, base RGB colour, texture); thing ids first, so labels put things first.
COCO_DEMO_CATEGORIES: dict[int, tuple[str, int, tuple[int, int, int], str]] = {
    1: ('person', 1, (240, 200, 40), 'checker'),
    3: ('car', 1, (210, 30, 40), 'flat'),
    149: ('road', 0, (90, 90, 95), 'hstripes'),
    187: ('sky-other-merged', 0, (115, 170, 240), 'vgradient'),
    193: ('grass-merged', 0, (95, 195, 60), 'vstripes'),
}
THING_CLASSES = tuple(name for name, isthing, _, _ in COCO_DEMO_CATEGORIES.values() if isthing)
STUFF_CLASSES = tuple(name for name, isthing, _, _ in COCO_DEMO_CATEGORIES.values() if not isthing)
#: ``metainfo`` for mmdet's datasets on this set: ``CocoPanopticDataset(metainfo=COCO_DEMO_METAINFO, ...)``.
COCO_DEMO_METAINFO = dict(classes=THING_CLASSES + STUFF_CLASSES, thing_classes=THING_CLASSES,
                          stuff_classes=STUFF_CLASSES,
                          palette=[c for _, _, c, _ in COCO_DEMO_CATEGORIES.values()])
SKY, GROUNDS = 187, (149, 193)
MIN_VISIBLE = 16  # fewest visible pixels an instance keeps
MAX_SEGMENT_ID = 256**3 - 1  # the RGB encoding's range (0 = void)


def coco_demo_files(num_train: int, num_val: int) -> dict[str, list[tuple[int, str, str]]]:
    """``{split: [(image id, image path, panoptic PNG path), ...]}`` relative to the root."""
    layout, image_id = {}, 0
    for split, count in zip(SPLITS, (num_train, num_val)):
        rows = []
        for _ in range(count):
            image_id += 1
            rows.append((image_id, osp.join(f'{split}2017', f'{image_id:012d}.jpg'),
                         osp.join('annotations', f'panoptic_{split}2017', f'{image_id:012d}.png')))
        layout[split] = rows
    return layout


def _appearance(category: int, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """(height, width, 3) float32: the category's colour modulated by its texture."""
    _, _, colour, kind = COCO_DEMO_CATEGORIES[category]
    side = max(height, width)
    return np.asarray(colour, np.float32) + 30.0 * _texture(kind, side, rng)[:height, :width, None]


def _thing_shape(category: int, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean (height, width) mask: a person is an upright ellipse, a car a wide rectangle."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    if COCO_DEMO_CATEGORIES[category][0] == 'person':
        ry, rx = rng.uniform(0.2, 0.35) * height, rng.uniform(0.06, 0.12) * width
        cy, cx = rng.uniform(ry, height - ry), rng.uniform(rx, width - rx)
        return ((yy - cy) / ry)**2 + ((xx - cx) / rx)**2 <= 1.0
    h, w = int(rng.uniform(0.2, 0.35) * height), int(rng.uniform(0.25, 0.4) * width)
    y0, x0 = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
    return (yy >= y0) & (yy < y0 + h) & (xx >= x0) & (xx < x0 + w)


def make_coco_sample(height: int, width: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """One RGB image, its segment-id map (H, W) int64 (0 = void) and its segments ``[{'id', 'category_id'}]``."""
    ids = iter((rng.choice(MAX_SEGMENT_ID, size=16, replace=False) + 1).tolist())
    segment_map = np.zeros((height, width), np.int64)
    image = np.zeros((height, width, 3), np.float32)
    horizon = int(rng.uniform(0.3, 0.6) * height)
    sky = np.broadcast_to(np.arange(height)[:, None] < horizon, (height, width))
    segments = []
    for category, region in ((SKY, sky), (int(rng.choice(GROUNDS)), ~sky)):
        segments.append(dict(id=next(ids), category_id=category))
        segment_map[region] = segments[-1]['id']
        image[region] = _appearance(category, height, width, rng)[region]
    if rng.random() < 0.3:  # a void region
        yy, xx = np.mgrid[0:height, 0:width]
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(0.08, 0.15) * height
        void = (yy - cy)**2 + (xx - cx)**2 <= r * r
        segment_map[void] = 0
        image[void] = rng.uniform(0, 255, 3)
    things = [c for c, (_, isthing, _, _) in COCO_DEMO_CATEGORIES.items() if isthing]
    for category in rng.choice(things, rng.integers(1, 4)).tolist():
        shape = _thing_shape(category, height, width, rng)
        segment_id = next(ids)
        segment_map[shape] = segment_id
        image[shape] = _appearance(category, height, width, rng)[shape]
        segments.append(dict(id=segment_id, category_id=category))
    image += rng.normal(0.0, 6.0, image.shape)
    present = set(np.unique(segment_map).tolist())
    segments = [s for s in segments if s['id'] in present and (segment_map == s['id']).sum() >= MIN_VISIBLE]
    kept = {s['id'] for s in segments}
    segment_map[~np.isin(segment_map, list(kept))] = 0  # segments too small to keep become void
    return np.clip(image, 0, 255).astype(np.uint8), segment_map, segments


def _box(mask: np.ndarray) -> list[float]:
    """COCO's [x, y, w, h] of a boolean mask."""
    ys, xs = mask.nonzero()
    return [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]


def _categories(things_only: bool) -> list[dict]:
    return [dict(id=cat_id, name=name, supercategory='thing' if isthing else 'stuff', isthing=isthing,
                 color=list(colour))
            for cat_id, (name, isthing, colour, _) in COCO_DEMO_CATEGORIES.items() if isthing or not things_only]


def make_demo_coco(root: str, num_train: int = 40, num_val: int = 10, size: int = 64, seed: int = 0) -> str:
    """Write the COCO-layout demo set under ``root``; a second call with the same arguments rewrites nothing.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    layout = coco_demo_files(num_train, num_val)
    annotation_files = [osp.join('annotations', f'{kind}_{split}2017.json') for split in SPLITS
                        for kind in ('panoptic', 'instances')]
    expected = annotation_files + [p for rows in layout.values() for _, image, png in rows for p in (image, png)]
    arguments = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)
    tree = open_demo_root(root, 'beit_mm.data.demo_coco.make_demo_coco', arguments, expected)
    if tree.mode == KEEP or (tree.mode == UPDATE and tree.complete(expected)):
        return root
    height, width = size, size + size // 2
    tree.remove_stale(expected)
    rng = np.random.default_rng(seed)
    for split in SPLITS:
        split_rng = np.random.default_rng(rng.integers(2**32))
        images, panoptic, instances = [], [], []
        for image_id, image_path, png_path in layout[split]:
            image, segment_map, segments = make_coco_sample(height, width, split_rng)
            tree.save_image(image_path, Image.fromarray(image), quality=92)
            tree.save_image(png_path, Image.fromarray(id2rgb(segment_map)))
            images.append(dict(id=image_id, file_name=osp.basename(image_path), height=height, width=width))
            infos = []
            for segment in segments:
                mask = segment_map == segment['id']
                info = dict(segment, iscrowd=0, bbox=_box(mask), area=int(mask.sum()))
                infos.append(info)
                if COCO_DEMO_CATEGORIES[segment['category_id']][1]:
                    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
                    rle['counts'] = rle['counts'].decode('ascii')
                    instances.append(dict(id=len(instances) + 1 + 100000 * SPLITS.index(split), image_id=image_id,
                                          category_id=segment['category_id'], segmentation=rle, area=info['area'],
                                          bbox=info['bbox'], iscrowd=0))
            panoptic.append(dict(image_id=image_id, file_name=osp.basename(png_path), segments_info=infos))
        info = dict(description='beit_mm COCO-layout demo (synthetic)', version='1.0')
        tree.write_text(osp.join('annotations', f'panoptic_{split}2017.json'), json.dumps(
            dict(info=info, licenses=[], images=images, annotations=panoptic, categories=_categories(False))))
        tree.write_text(osp.join('annotations', f'instances_{split}2017.json'), json.dumps(
            dict(info=info, licenses=[], images=images, annotations=instances, categories=_categories(True))))
    tree.finish()
    return root
