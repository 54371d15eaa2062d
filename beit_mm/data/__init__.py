from .datasets import (ADE20KPanopticDataset, CustomSegDataset, LoadADE20KPanopticAnnotations,  # noqa: F401
                       LoadCocoAnnotations, LoadPanopticAnnotations)
from .transforms import (BEiTMaskGenerator, BlockwiseMaskGenerator, DecodeRandomResizedCrop,  # noqa: F401
                         DecodeTwoViewRandomResizedCrop, EncodedRandomResizedCrop, EncodedTwoViewRandomResizedCrop,
                         HistogramRandomCrop, RandomMaskGenerator, SampleColorJitter, SamplePhotoMetricDistortion,
                         SampleRandAugment, SampleRandomErasing, TwoViewRandomResizedCrop)
