"""Evaluation: the frozen-feature probes, the panoptic metric and its baseline, feature and token statistics, and
the FLOP counter (imported on its own)."""
from .probe import (DenseProbe, LabeledDataError, classification_probe, extract_dense_features,  # noqa: F401
                    load_image_folder)
