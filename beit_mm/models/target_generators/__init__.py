from .dalle import LOGIT_LAPLACE_EPS, DALLEEncoder, map_pixels  # noqa: F401
from .pixels import PatchPixelTarget, patchify  # noqa: F401
