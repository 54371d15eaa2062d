from . import backbones, heads, layers, necks, selfsup, target_generators  # noqa: F401
from . import tokenizers  # noqa: F401
