
from .mim_head import BEiTMIMHead  # noqa: F401
