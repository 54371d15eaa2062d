"""Evaluation: the frozen-feature probes on labeled sets, the panoptic metric and its baseline, feature and token
statistics, and the FLOP counter (imported on its own)."""
from ..data.datasets.labeled_sets import LabeledDataError, load_image_folder  # noqa: F401
from .probe import DenseProbe, classification_probe, extract_dense_features  # noqa: F401
