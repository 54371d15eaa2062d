"""Segmentors built on the backbones (EoMT's pieces so far)."""
from .mask_annealing import anneal_attention_mask, mask_probabilities  # noqa: F401
