from .mim_head import BEiTMIMHead  # noqa: F401
from .pixel_head import PixelRegressionHead  # noqa: F401
