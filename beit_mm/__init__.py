"""beit_mm: the registries of scope ``beit_mm`` and the file room that MMEngine opens and writes checkpoints through.

Models, transforms, hooks and the rest register when first used: a config's ``type='beit_mm.X'`` (or ``'X'`` under
``default_scope='beit_mm'``) imports the package its registry names (:mod:`beit_mm.registry`). Subpackages load on
first attribute access (``beit_mm.models``) or import.
"""
import importlib

from . import fileio  # noqa: F401  (MMEngine opens checkpoints and writes through it from here on)
from .registry import MODELS  # noqa: F401

__version__ = '0.1.0'

SUBPACKAGES = ('apis', 'benchmarks', 'converters', 'data', 'engine', 'evaluation', 'models', 'studies', 'visualization')


def __getattr__(name: str):
    if name in SUBPACKAGES:
        return importlib.import_module(f'{__name__}.{name}')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
