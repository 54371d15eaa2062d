"""beit_mm: importing the package registers every model, transform, hook and optimizer constructor."""
from . import fileio  # noqa: F401  (first: MMEngine opens checkpoints and writes through it from here on)
from . import models  # noqa: F401  (converters import models.layers)
from . import apis, converters, data, engine  # noqa: F401  (registrations)
from .evaluation import panoptic_quality  # noqa: F401  (registers PanopticQualityMetric)
from .registry import MODELS  # noqa: F401

__version__ = '0.1.0'
