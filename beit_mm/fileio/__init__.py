"""The file room: every checkpoint beit_mm (and MMEngine through it) opens and every file it writes goes through
here; it imports nothing else of beit_mm. Inputs open only as regular files (:mod:`.inputs`) with checked tensors
(:mod:`.tensors`) and a pixel limit (:mod:`.images`); checkpoints open with ``weights_only=True`` (:mod:`.checkpoint`,
:mod:`.safe_globals`, :mod:`.remote`); outputs are checked first and written atomically (:mod:`.outputs`,
:mod:`.output_folder`, :mod:`.manifest`).

Importing it registers the safe globals, MMEngine's reading and atomic backends, the loaders and the pixel limit.
"""
from mmengine.fileio import register_backend

from .checkpoint import (STATE_DICT_KEYS, CheckpointFileError, check_checkpoint_file, checkpoint_kind,  # noqa: F401
                         is_complete_checkpoint, load_state_dict_file, open_checkpoint, unwrap_state_dict)
from .images import ImageHeaderError, ImageTooLargeError, ImageWorkError, apply_pixel_limit  # noqa: F401
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
