from .atomic_checkpoint import AtomicCheckpointHook  # noqa: F401
from ..resume.guard import CheckpointGuardHook, use_checkpoint_guard_hook  # noqa: F401
from .batch_norm_sync import BatchNormSyncHook, use_batch_norm_sync_hook  # noqa: F401
from .batch_size_check import BatchSizeCheckHook, batch_size_warning, effective_batch_size  # noqa: F401
from .dataset_check import SegDatasetCheckHook  # noqa: F401
from .dvae_schedule import DVAEScheduleHook, cosine_anneal  # noqa: F401
from .loss_guard import NonFiniteLossError, NonFiniteLossHook  # noqa: F401
from .rng_state import RNGStateHook, use_rng_state_hook  # noqa: F401
from .tokenizer_eval import TokenizerEvalHook  # noqa: F401
from .dense_probe import DenseProbeHook  # noqa: F401
from .eomt_annealing import EoMTMaskAnnealingHook  # noqa: F401
from .compile import CompileHook, use_compile_hook  # noqa: F401
