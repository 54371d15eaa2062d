from .ade20k_panoptic import ADE20KPanopticDataset, LoadADE20KPanopticAnnotations  # noqa: F401
from .coco_panoptic import LoadCocoAnnotations, LoadPanopticAnnotations  # noqa: F401
from .custom import CustomSegDataset  # noqa: F401
