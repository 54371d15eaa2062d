from . import backbones, heads, layers, necks, selfsup  # noqa: F401
from . import tokenizers  # noqa: F401
