"""Pure functions: foreign checkpoint state dicts -> beit_mm state dicts."""
from .beit import convert_beit  # noqa: F401
from .io import load_state_dict_file, unwrap_state_dict  # noqa: F401
