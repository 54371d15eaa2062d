from . import backbones, heads, layers, losses, necks, segmentors, selfsup  # noqa: F401
from . import tokenizers  # noqa: F401
