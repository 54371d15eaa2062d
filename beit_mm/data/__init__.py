from .ade20k_panoptic import ADE20KPanopticDataset, LoadADE20KPanopticAnnotations  # noqa: F401
from .coco_panoptic import LoadCocoAnnotations, LoadPanopticAnnotations  # noqa: F401

from .custom import CustomSegDataset  # noqa: F401
from .masking import BEiTMaskGenerator, BlockwiseMaskGenerator, RandomMaskGenerator  # noqa: F401
from .mim_transforms import TwoViewRandomResizedCrop  # noqa: F401
from .draft_transforms import DecodeRandomResizedCrop, DecodeTwoViewRandomResizedCrop, SampleColorJitter  # noqa: F401
from .encoded_transforms import EncodedTwoViewRandomResizedCrop  # noqa: F401
from .seg_transforms import HistogramRandomCrop, SamplePhotoMetricDistortion  # noqa: F401
from .cls_transforms import SampleRandAugment, SampleRandomErasing  # noqa: F401
