"""Trainable tokenizers (train your own BEiT target generator)."""
from .dvae import (DVAE, DALLEDecoder, DVAEEncoder, codebook_perplexity, codebook_usage,  # noqa: F401
                   logit_laplace_nll, unmap_pixels)
