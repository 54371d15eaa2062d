
from .beit import BEiT  # noqa: F401
from .cvt import CvT  # noqa: F401
