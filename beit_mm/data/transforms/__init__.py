from .color_jitter import SampleColorJitter  # noqa: F401
from .crop import TwoViewRandomResizedCrop  # noqa: F401
from .decode import DecodeRandomResizedCrop, DecodeTwoViewRandomResizedCrop  # noqa: F401
from .encoded import EncodedRandomResizedCrop, EncodedTwoViewRandomResizedCrop  # noqa: F401
from .masking import BEiTMaskGenerator, BlockwiseMaskGenerator, RandomMaskGenerator  # noqa: F401
from .photometric import SamplePhotoMetricDistortion  # noqa: F401
from .rand_augment import SampleRandAugment  # noqa: F401
from .random_erasing import SampleRandomErasing  # noqa: F401
from .seg_crop import HistogramRandomCrop  # noqa: F401
