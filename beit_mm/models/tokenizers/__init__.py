"""Image-to-MIM-target generators, frozen and trainable.

A generator's ``get_targets(inputs) -> (B, N, ...)`` gives one target per backbone patch, row-major; ``inputs`` holds
``images`` (the normalized backbone view) and ``target_images`` (float RGB 0..255, the tokenizer view) and each
generator maps them to its own input. Trainable tokenizers (``DVAE``, ``VQKD`` with a teacher) load into the frozen
generators.
"""
from .dalle import LOGIT_LAPLACE_EPS, DALLEEncoder, map_pixels  # noqa: F401
from .dvae import (DVAE, DALLEDecoder, DVAEEncoder, codebook_perplexity, codebook_usage,  # noqa: F401
                   logit_laplace_nll, unmap_pixels)
from .pixels import PatchPixelTarget, patchify  # noqa: F401
from .quantizer import NormEMAQuantizer  # noqa: F401
from .teachers import BackboneTeacher, CLIPTeacher  # noqa: F401
from .vqkd import VQKD  # noqa: F401
