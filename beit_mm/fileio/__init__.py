"""The file room: every checkpoint beit_mm (and MMEngine, mmseg, mmpretrain through it) opens, and every file it
writes, goes through here. It imports nothing else of beit_mm, so every other part can use it.

- :mod:`.inputs`: inputs are opened only as regular files (never a FIFO or device), MMEngine's local reads included;
- :mod:`.tensors`: what every loaded tensor and structure satisfies (dense, inside its storage, not overlapping,
  bounded by the file's size), checked once for every format;
- :mod:`.images`: one pixel limit for every image decoder, read from the header before decoding;
- :mod:`.checkpoint`: what a file is, and opening it with ``torch.load(weights_only=True)``, stored config source
  dropped;
- :mod:`.safe_globals`: the one allow-list of non-tensor objects (MMEngine's training state);
- :mod:`.remote`: URLs and MMEngine's prefixes, fetched to the hub cache and opened as local files; registered as the
  loader of every prefix of MMEngine's ``CheckpointLoader``;
- :mod:`.work_dir`: a run's work dir: another run's checkpoints, the ``last_checkpoint`` pointer;
- :mod:`.outputs`: the one guarded writer: destinations checked before any work (no link, no input, nothing inside a
  dataset root, nothing replaced without ``--overwrite``), files and folders written atomically;
- :mod:`.output_folder` / :mod:`.manifest`: output folders whose manifest lists what a tool wrote, so ``--overwrite``
  removes only that;
- :mod:`.dataset_roots`: what counts as a dataset root (no output goes inside one).

Importing it registers the safe globals, the reading and the atomic MMEngine backends, the loaders and the pixel limit
(``import beit_mm`` does).
"""
from mmengine.fileio import register_backend

from .checkpoint import (STATE_DICT_KEYS, CheckpointFileError, check_checkpoint_file, checkpoint_kind,  # noqa: F401
                         is_complete_checkpoint, load_state_dict_file, open_checkpoint, unwrap_state_dict)
from .images import ImageHeaderError, ImageTooLargeError, apply_pixel_limit  # noqa: F401
from .inputs import (NotARegularFileError, SparseFileError, check_image_file, open_image, open_input,  # noqa: F401
                     register_input_backend)
from .output_folder import OutputFolder  # noqa: F401
from .outputs import (ATOMIC_BACKEND, AtomicLocalBackend, OutputError, atomic_dir, atomic_file,  # noqa: F401
                      atomic_write_bytes, check_output)
from .remote import register_mmengine_loaders
from .safe_globals import register_checkpoint_safe_globals

register_checkpoint_safe_globals()
register_backend(ATOMIC_BACKEND, AtomicLocalBackend, force=True)
register_mmengine_loaders()
register_input_backend()
apply_pixel_limit()
