"""Evaluation of frozen features: the dense (patch-level) and image-level probes (``probe.py``) on labeled sets
(``labeled_data.py``); the FLOP counter (``flops.py``, imported on its own: it needs ``mmengine.analysis``)."""
from .labeled_data import LabeledDataError, load_image_folder  # noqa: F401
from .probe import DenseProbe, classification_probe, extract_dense_features  # noqa: F401
