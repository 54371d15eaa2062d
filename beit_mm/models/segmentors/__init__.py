"""Segmentors built on the backbones: EoMT and its mask annealing, PMT; the segmentation data preprocessor."""
from .eomt import EoMT  # noqa: F401
from .pmt import PMT  # noqa: F401
from .mask_annealing import anneal_attention_mask, mask_probabilities  # noqa: F401
from .data_preprocessor import PhotoMetricSegDataPreProcessor  # noqa: F401
