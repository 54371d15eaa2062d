"""Pure functions: foreign checkpoint state dicts -> beit_mm state dicts."""
from .beit import convert_beit  # noqa: F401
