"""Resuming and starting a run from a checkpoint: every check in one package, the walk going down to the file room.

- :mod:`.start`: :func:`prepare_start` opens the file ``--resume`` means once and checks it before anything is built,
  adding the guard and RNG-state hooks; :func:`check_start_checkpoint` checks its weights against the built model and
  hands it to the run's load (:mod:`.opened`);
- :mod:`.guard`: :class:`CheckpointGuardHook`, in ``after_load_checkpoint``, runs :func:`validate_resume`
  (:mod:`.validate`), which keeps only the allow-list (:mod:`.fields`: what MMEngine 0.10.7 and beit_mm's hooks read)
  and checks it against this run: counters and batch record (:mod:`.counters`), generator states (:mod:`.rng`),
  message hub (:mod:`.message_hub`), weights and optimizer state (:mod:`.optimizer`), schedulers (:mod:`.schedulers`).

A refusal is a :class:`TrainingStateError` (or :class:`StartCheckpointError`) naming the file, the key, the value and
the fix; what is dropped is returned for one warning.
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
