"""beit_mm: importing the package registers every model, transform, hook and optimizer constructor."""
from . import models  # noqa: F401  (first: converters import models.layers)
from . import apis, converters, data, engine  # noqa: F401  (registrations; apis: MMEngine loads checkpoints safely)
from .registry import MODELS  # noqa: F401

__version__ = '0.1.0'
