"""Losses of the segmentation heads (Mask2Former's matching loss so far)."""
from .mask_classification import (MaskClassificationLoss, hungarian_match, semantic_targets,  # noqa: F401
                                  uncertain_points)
