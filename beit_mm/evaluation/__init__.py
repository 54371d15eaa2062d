"""Evaluation of frozen features: the dense (patch-level) and image-level probes (``probe.py``)."""
from .probe import (DenseProbe, LabeledDataError, classification_probe, extract_dense_features,  # noqa: F401
                    load_image_folder)
