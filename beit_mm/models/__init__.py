from . import backbones, classifiers, heads, layers, losses, necks, segmentors, selfsup  # noqa: F401
from . import tokenizers  # noqa: F401
