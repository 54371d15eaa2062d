"""Evaluation of frozen features: the dense (patch-level) and image-level probes (``probe.py``); the FLOP counter
(``flops.py``, imported on its own: it needs ``mmengine.analysis``)."""
from .probe import (DenseProbe, LabeledDataError, classification_probe, extract_dense_features,  # noqa: F401
                    load_image_folder)
