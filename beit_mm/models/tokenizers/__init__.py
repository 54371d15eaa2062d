"""Everything that turns images into MIM targets, frozen or trainable, in one place.

The target interface (what ``beit_mm.BEiTPretrain`` calls under ``torch.no_grad()``)::

    get_targets(inputs: dict[str, Tensor]) -> Tensor     # (B, N, ...) one target per backbone patch, row-major

``inputs`` is ``beit_mm.MIMDataPreprocessor``'s output: ``images`` (B, 3, H, W), the normalized backbone view, and
``target_images`` (B, 3, h, w), the tokenizer view as float RGB 0..255, which each generator maps to its own input.
Implementations:

- ``dalle.DALLEEncoder``: frozen DALL-E dVAE encoder; maps ``target_images`` by ``map_pixels(x / 255)`` and
  returns int64 token ids (B, h/8 * w/8).
- ``pixels.PatchPixelTarget``: per-patch normalized pixels of ``images``, float (B, N, p * p * 3).
- ``vqkd.VQKD``: BEiT v2's vector-quantized knowledge-distillation tokenizer; reads ``target_images`` (float RGB in
  0..255) and returns int64 token ids (B, h/16 * w/16) (``h/p * w/p`` for its patch size p).

Trainable tokenizers are MMEngine models (``forward(mode='loss')``) whose trained weights load into the frozen target
generator: ``dvae.DVAE`` (pixel reconstruction; its encoder is ``DALLEEncoder``) and ``vqkd.VQKD`` with a teacher
(reconstruction of a frozen model's patch features; teachers in ``teachers``, the codebook in ``quantizer``).
``evaluation`` measures codebook usage and reconstruction on held-out images.
"""
from .dalle import LOGIT_LAPLACE_EPS, DALLEEncoder, map_pixels  # noqa: F401
from .dvae import (DVAE, DALLEDecoder, DVAEEncoder, codebook_perplexity, codebook_usage,  # noqa: F401
                   logit_laplace_nll, unmap_pixels)
from .pixels import PatchPixelTarget, patchify  # noqa: F401
from .quantizer import NormEMAQuantizer  # noqa: F401
from .teachers import BackboneTeacher, CLIPTeacher  # noqa: F401
from .vqkd import VQKD  # noqa: F401
