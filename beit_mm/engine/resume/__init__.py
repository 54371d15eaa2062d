"""Resuming and starting a run from a checkpoint: every check in one package.

:mod:`.start` opens and checks the start checkpoint before anything is built; :class:`CheckpointGuardHook` runs
:func:`validate_resume` on load, which keeps the allow-listed fields (:mod:`.fields`) and checks them against this run.
"""
from .fields import (CHECKPOINT_FIELDS, MESSAGE_HUB_FIELDS, META_DROPPED, META_FIELDS, OPTIMIZER_FIELDS,  # noqa: F401
                     RUNTIME_INFO_FIELDS, RUNTIME_INFO_PREFIXES, RUNTIME_INFO_REWRITTEN,
                     RUNTIME_INFO_REWRITTEN_PREFIXES, TrainingStateError, is_dense)
from .counters import batch_now, batch_record, check_batch, check_counters, check_seed  # noqa: F401
from .rng import check_rng_state, check_rng_states  # noqa: F401
from .message_hub import clean_message_hub, clean_runtime_info, same_run  # noqa: F401
from .optimizer import check_optimizer_state, check_tensors  # noqa: F401
from .schedulers import check_param_schedulers  # noqa: F401
from .validate import ResumeReport, validate_resume  # noqa: F401
from .opened import OpenedCheckpoint, give_to_runner, identity_or_none  # noqa: F401
from .guard import CheckpointGuardHook, use_checkpoint_guard_hook  # noqa: F401
from .start import (StartCheckpointError, check_resumable, check_start_checkpoint, prepare_start,  # noqa: F401
                    set_resume)
