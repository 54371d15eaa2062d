
from .dvae_schedule import DVAEScheduleHook, cosine_anneal  # noqa: F401
