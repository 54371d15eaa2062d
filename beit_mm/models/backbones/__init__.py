from .beit import BEiT  # noqa: F401
from .beit_adapter import BEiTAdapter  # noqa: F401
from .cvt import CvT  # noqa: F401
from .dinov3 import DINOv3  # noqa: F401
