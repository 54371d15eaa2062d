"""The ADE20K train pipeline's costly steps made cheaper, with mmseg's draws and results.

The exact pipeline (mmseg 1.2 transforms; unilm ``semantic_segmentation`` configs)::

    LoadImageFromFile -> LoadAnnotations -> RandomResize -> RandomCrop(cat_max_ratio=0.75) -> RandomFlip
    -> PhotoMetricDistortion -> PackSegInputs

spends most of a worker's time in ``RandomCrop``'s category check (``np.unique``, a sort, on up to 10 label crops)
and in ``PhotoMetricDistortion`` (two HSV round trips of the crop on the CPU). This one::

    LoadImageFromFile -> LoadAnnotations -> RandomResize -> HistogramRandomCrop(cat_max_ratio=0.75) -> RandomFlip
    -> SamplePhotoMetricDistortion -> PackSegInputs(meta_keys=(..., 'photometric_distortion'))
    + PhotoMetricSegDataPreProcessor applies the distortion on the device

draws the same random numbers in the same order from NumPy's global RNG, so for the same seed the crop, the flip and
the distortion's parameters equal the exact pipeline's; the label crop and the image crop are the exact pipeline's,
and the distortion (:func:`beit_mm.data.photometric.photometric_distortion`) reproduces OpenCV's 8-bit HSV
conversions pixel for pixel.
"""
from __future__ import annotations

import numpy as np
from mmcv.transforms import BaseTransform
from mmcv.transforms.utils import cache_randomness
from mmseg.datasets.transforms import RandomCrop

from beit_mm.registry import TRANSFORMS

# Where the drawn distortion travels: the results key, and the sample's metainfo key PackSegInputs copies it to.
PHOTOMETRIC_KEY = 'photometric_distortion'
# Labels of an 8-bit segmentation map: the histogram's bins.
UINT8_LABELS = 256


@TRANSFORMS.register_module()
class HistogramRandomCrop(RandomCrop):
    """mmseg's ``RandomCrop`` with the category check on a histogram (``np.bincount``) instead of ``np.unique``: the
    same offsets drawn in the same order, the same accept rule (more than one category besides ``ignore_index``, the
    largest below ``cat_max_ratio`` of them), so the same crop box.

    Args:
        crop_size, cat_max_ratio, ignore_index: as mmseg's ``RandomCrop``.
    """

    @staticmethod
    def _accept(labels: np.ndarray, cat_max_ratio: float, ignore_index: int) -> bool:
        """mmseg's test on the counts of the labels present in ``labels`` other than ``ignore_index``."""
        if labels.dtype == np.uint8:
            counts = np.bincount(labels.ravel(), minlength=UINT8_LABELS)
            if 0 <= ignore_index < UINT8_LABELS:
                counts[ignore_index] = 0
            counts = counts[counts > 0]
        else:  # a wider label type: mmseg's own count
            values, counts = np.unique(labels, return_counts=True)
            counts = counts[values != ignore_index]
        return len(counts) > 1 and np.max(counts) / np.sum(counts) < cat_max_ratio

    @cache_randomness
    def crop_bbox(self, results: dict) -> tuple:
        """``(y1, y2, x1, x2)``: mmseg ``RandomCrop.crop_bbox``'s box for the same NumPy RNG state."""
        height, width = results['img'].shape[:2]
        margin_h, margin_w = max(height - self.crop_size[0], 0), max(width - self.crop_size[1], 0)

        def draw() -> tuple:
            top, left = np.random.randint(0, margin_h + 1), np.random.randint(0, margin_w + 1)
            return top, top + self.crop_size[0], left, left + self.crop_size[1]

        box = draw()
        if self.cat_max_ratio < 1.:
            for _ in range(10):  # mmseg's 10 tries
                if self._accept(self.crop(results['gt_seg_map'], box), self.cat_max_ratio, self.ignore_index):
                    break
                box = draw()
        return box


@TRANSFORMS.register_module()
class SamplePhotoMetricDistortion(BaseTransform):
    """Draw mmseg ``PhotoMetricDistortion``'s parameters (its draws, in its order) without touching the pixels:
    ``results['photometric_distortion'] = dict(brightness, contrast, contrast_last, saturation, hue)`` (None where an
    op's coin said no), which ``PackSegInputs`` carries in the sample's metainfo when its ``meta_keys`` name it and
    the data preprocessor applies (:func:`beit_mm.data.photometric.photometric_distortion`).

    Args:
        brightness_delta, contrast_range, saturation_range, hue_delta: as mmseg's ``PhotoMetricDistortion``.
    """

    def __init__(self,
                 brightness_delta: int = 32,
                 contrast_range: tuple[float, float] = (0.5, 1.5),
                 saturation_range: tuple[float, float] = (0.5, 1.5),
                 hue_delta: int = 18) -> None:
        self.brightness_delta = brightness_delta
        self.contrast_range = tuple(contrast_range)
        self.saturation_range = tuple(saturation_range)
        self.hue_delta = hue_delta

    def transform(self, results: dict) -> dict:
        # mmseg 1.2 PhotoMetricDistortion.transform: brightness, the contrast mode, [contrast], saturation, hue,
        # [contrast]; each op one np.random.randint(2) coin, then its value if the coin is 1
        rng = np.random
        brightness = float(rng.uniform(-self.brightness_delta, self.brightness_delta)) if rng.randint(2) else None
        contrast_last = rng.randint(2) == 0
        contrast = None
        if not contrast_last and rng.randint(2):
            contrast = float(rng.uniform(*self.contrast_range))
        saturation = float(rng.uniform(*self.saturation_range)) if rng.randint(2) else None
        hue = int(rng.randint(-self.hue_delta, self.hue_delta)) if rng.randint(2) else None
        if contrast_last and rng.randint(2):
            contrast = float(rng.uniform(*self.contrast_range))
        results[PHOTOMETRIC_KEY] = dict(brightness=brightness, contrast=contrast, contrast_last=bool(contrast_last),
                                        saturation=saturation, hue=hue)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(brightness_delta={self.brightness_delta}, '
                f'contrast_range={self.contrast_range}, saturation_range={self.saturation_range}, '
                f'hue_delta={self.hue_delta})')
