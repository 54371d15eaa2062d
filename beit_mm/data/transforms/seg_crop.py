"""mmseg's ``RandomCrop`` with its category check on a histogram: the same draws, the same boxes, cheaper."""
from __future__ import annotations

import numpy as np
from mmcv.transforms.utils import cache_randomness
from mmseg.datasets.transforms import RandomCrop

from beit_mm.registry import TRANSFORMS

# Labels of an 8-bit segmentation map: the histogram's bins.
UINT8_LABELS = 256


@TRANSFORMS.register_module()
class HistogramRandomCrop(RandomCrop):
    """mmseg's ``RandomCrop`` with the category check on ``np.bincount`` instead of ``np.unique``: the same boxes.

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
