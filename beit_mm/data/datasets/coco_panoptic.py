"""COCO annotations read through mmdet, bounded by the image they annotate: panoptic PNGs without ``panopticapi``, and
instance masks checked before pycocotools allocates them.

A panoptic PNG stores each pixel's segment id as RGB, ``id = R + 256 G + 256^2 B``, 0 = void. pycocotools allocates
what an RLE or polygon declares without checks, so each mask is bounded by the loaded image first.
"""
from __future__ import annotations

import math

import numpy as np
from mmdet.datasets.transforms import LoadAnnotations as DetLoadAnnotations
from mmdet.datasets.transforms import LoadPanopticAnnotations as DetLoadPanopticAnnotations

from beit_mm.registry import TRANSFORMS

from ..checks import DatasetCheckError

#: How far outside its image (pixels, each side) a polygon vertex may lie: COCO's lie within half a pixel.
POLYGON_MARGIN = 32


def rgb2id(rgb: np.ndarray) -> np.ndarray:
    """A panoptic PNG's (H, W, 3) RGB -> segment ids (H, W) int64, ``R + 256 G + 256^2 B``."""
    rgb = np.asarray(rgb).astype(np.int64)
    return rgb[..., 0] + 256 * rgb[..., 1] + 256**2 * rgb[..., 2]


def id2rgb(segment_ids: np.ndarray) -> np.ndarray:
    """The inverse of :func:`rgb2id`: segment ids (H, W) below 256^3 -> (H, W, 3) uint8."""
    segment_ids = np.asarray(segment_ids, dtype=np.int64)
    return np.stack([(segment_ids // 256**i) % 256 for i in range(3)], axis=-1).astype(np.uint8)


#: The most segments x pixels of one panoptic image: mmdet's loader compares the whole map with each listed segment
#: and keeps a full-image uint8 mask per thing, so this is its time and its bytes. COCO (at most ~100 segments of
#: 640 x 640) and Cityscapes (~300 of 2048 x 1024) stay below 2**30, 1 GiB of masks.
MAX_SEGMENT_PIXELS = 2**30


def check_segments(segments_info: list, segment_ids: np.ndarray, source: str) -> None:
    """Refuse a ``segments_info`` with more entries than the PNG's non-void ids, one id twice, or more segments x
    pixels than :data:`MAX_SEGMENT_PIXELS`.

    Raises:
        DatasetCheckError: naming ``source``, the counts and the fix.
    """
    work = len(segments_info) * segment_ids.size
    if work > MAX_SEGMENT_PIXELS:
        raise DatasetCheckError(
            f'{source}: its segments_info lists {len(segments_info)} segments for {segment_ids.size} pixels: '
            f'{work} segment-pixels, more than {MAX_SEGMENT_PIXELS} (each segment is a full-image mask, so loading it '
            'would cost that many bytes and comparisons; COCO and Cityscapes images stay far below). Fix: give the '
            'right annotation file, or split the image')
    ids = [segment.get('id') if isinstance(segment, dict) else None for segment in segments_info]
    present = np.unique(segment_ids)
    present = int((present != 0).sum())
    if len(ids) > present or len(set(ids)) != len(ids):
        raise DatasetCheckError(
            f'{source}: its segments_info lists {len(ids)} segments ({len(set(ids))} distinct ids), but the PNG holds '
            f'{present} segment ids: each entry is a full-image mask, so an annotation file cannot list more '
            'segments than its PNG has, nor one twice. Fix: regenerate the panoptic JSON and PNGs together '
            '(panopticapi\'s converters), or give the right annotation file')


@TRANSFORMS.register_module()
class LoadPanopticAnnotations(DetLoadPanopticAnnotations):
    """mmdet's ``LoadPanopticAnnotations`` with :func:`rgb2id` in place of panopticapi's and :func:`check_segments`."""

    def __init__(self, with_bbox: bool = True, with_label: bool = True, with_mask: bool = True, with_seg: bool = True,
                 box_type: str = 'hbox', imdecode_backend: str = 'cv2', backend_args: dict | None = None) -> None:
        DetLoadAnnotations.__init__(self, with_bbox=with_bbox, with_label=with_label, with_mask=with_mask,
                                    with_seg=with_seg, with_keypoints=False, box_type=box_type,
                                    imdecode_backend=imdecode_backend, backend_args=backend_args)
        self.rgb2id = rgb2id

    def _load_masks_and_semantic_segs(self, results: dict) -> None:
        """mmdet's, with :func:`check_segments` riding on its one ``rgb2id`` call."""
        def checked_rgb2id(rgb: np.ndarray) -> np.ndarray:
            segment_ids = rgb2id(rgb)
            check_segments(results.get('segments_info', []), segment_ids, results['seg_map_path'])
            return segment_ids

        self.rgb2id = checked_rgb2id
        try:
            super()._load_masks_and_semantic_segs(results)
        finally:
            self.rgb2id = rgb2id


def rle_string_counts(counts: str) -> list[int] | None:
    """The runs of a compressed COCO RLE string (pycocotools' ``rleFrString``), or None when it is malformed."""
    runs, pos = [], 0
    while pos < len(counts):
        value, shift, more = 0, 0, True
        while more:
            if pos >= len(counts) or shift > 60:
                return None
            char = ord(counts[pos]) - 48
            if not 0 <= char < 64:
                return None
            value |= (char & 0x1F) << shift
            more = bool(char & 0x20)
            pos += 1
            shift += 5
            if not more and char & 0x10:
                value |= -1 << shift
        if len(runs) > 2:
            value += runs[-2]
        runs.append(value)
    return runs


def _mask_problem(mask, height: int, width: int) -> str | None:
    """What is wrong with one instance's ``segmentation`` for a ``height`` x ``width`` image, or None."""
    if isinstance(mask, list):
        for polygon in mask:
            if not isinstance(polygon, (list, tuple)):
                return f'a polygon that is a {type(polygon).__name__}, not a list of coordinates'
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in polygon):
                return 'a polygon with a coordinate that is not a finite number'
            xs, ys = polygon[0::2], polygon[1::2]
            if xs and (min(xs) < -POLYGON_MARGIN or max(xs) > width + POLYGON_MARGIN or min(ys) < -POLYGON_MARGIN
                       or max(ys) > height + POLYGON_MARGIN):
                return (f'a polygon reaching x {min(xs):g}..{max(xs):g}, y {min(ys):g}..{max(ys):g}, more than '
                        f'{POLYGON_MARGIN} pixels outside the image')
        return None
    if isinstance(mask, dict):
        size, counts = mask.get('size'), mask.get('counts')
        if counts is None and size is None:
            return None  # mmdet ignores such an entry (ignore_flag), decoding nothing
        if not isinstance(size, (list, tuple)) or [*size] != [height, width]:
            return f'an RLE of size {size!r}, not the image\'s [{height}, {width}] (height, width)'
        if isinstance(counts, (str, bytes)):
            runs = rle_string_counts(counts.decode('ascii', 'replace') if isinstance(counts, bytes) else counts)
        elif isinstance(counts, list) and all(type(v) is int for v in counts):
            runs = counts
        else:
            return 'an RLE whose counts are neither a string nor a list of ints'
        if runs is None or any(v < 0 for v in runs) or sum(runs) != height * width:
            return (f'an RLE whose runs cover {None if runs is None else sum(runs)} pixels, not the image\'s '
                    f'{height * width}')
        return None
    return f'a segmentation of type {type(mask).__name__}'


def check_instance_masks(results: dict) -> None:
    """Refuse an instance mask that declares more than its image (``results['ori_shape']``).

    Raises:
        DatasetCheckError: naming the image, the instance, the problem and the fix.
    """
    height, width = (int(v) for v in results['ori_shape'][:2])
    for index, instance in enumerate(results.get('instances', [])):
        problem = _mask_problem(instance.get('mask'), height, width)
        if problem is not None:
            raise DatasetCheckError(
                f'the annotation of {results.get("img_path")} (instance {index}) has {problem}: a mask is bounded by '
                f'its {width}x{height} image, and pycocotools allocates what a mask declares. Fix: correct that '
                'annotation in the JSON (segmentation in the image\'s pixel coordinates; RLE size [height, width] of '
                'the image), or pair the JSON with its own images')


@TRANSFORMS.register_module()
class LoadCocoAnnotations(DetLoadAnnotations):
    """mmdet's ``LoadAnnotations`` with :func:`check_instance_masks`; put it after ``LoadImageFromFile``."""

    def _load_masks(self, results: dict) -> None:
        check_instance_masks(results)
        super()._load_masks(results)
