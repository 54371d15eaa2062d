from .atomic_checkpoint import AtomicCheckpointHook  # noqa: F401
from .dataset_check import SegDatasetCheckHook  # noqa: F401
from .dvae_schedule import DVAEScheduleHook, cosine_anneal  # noqa: F401
from .loss_guard import NonFiniteLossError, NonFiniteLossHook  # noqa: F401
