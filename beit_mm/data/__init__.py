
from .masking import BEiTMaskGenerator, BlockwiseMaskGenerator  # noqa: F401
from .mim_transforms import TwoViewRandomResizedCrop  # noqa: F401
