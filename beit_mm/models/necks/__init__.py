
from .mean_pool import MeanPoolNeck  # noqa: F401
