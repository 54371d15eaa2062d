"""Checkpoints against models: the weight checks (:mod:`beit_mm.models.builder`) and the file errors
(:mod:`beit_mm.fileio`) under the entry points' names."""
from ..fileio.checkpoint import CheckpointFileError  # noqa: F401
from ..models.builder import CheckpointMismatchError, check_weights_match  # noqa: F401
