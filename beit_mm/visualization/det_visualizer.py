"""mmdet's visualizer for the panoptic and instance configs, drawing every prediction a test run meets."""
from __future__ import annotations

import numpy as np
from mmdet.visualization import DetLocalVisualizer

from ..registry import VISUALIZERS


@VISUALIZERS.register_module()
class PanopticDetLocalVisualizer(DetLocalVisualizer):
    """mmdet's ``DetLocalVisualizer`` that also draws a panoptic result without a segment (every pixel void), on which
    mmdet's ``_draw_panoptic_seg`` fails: the image is drawn as it is."""

    def _draw_panoptic_seg(self, image: np.ndarray, panoptic_seg, classes, palette) -> np.ndarray:
        void = (panoptic_seg.metainfo.get('ignore_index', len(panoptic_seg.metainfo['label_names']))
                if 'label_names' in panoptic_seg else len(classes))
        if not (np.asarray(panoptic_seg.sem_seg[0]) != void).any():
            return image
        return super()._draw_panoptic_seg(image, panoptic_seg, classes, palette)
