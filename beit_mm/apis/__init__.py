"""Model loading for every tool (as mmseg's ``mmseg/apis/inference.py``): check that a checkpoint fits a model
(:mod:`.checkpoint`; files are opened by :mod:`beit_mm.fileio`), build a config's model without the official files
its ``init_cfg`` names, resolve a checkpoint or a work dir, load a training checkpoint. Used by the pictures,
``tools/infer.py``, ``tools/analysis/get_flops.py``, the export, the converters and the probe."""
from ..fileio import CheckpointFileError, load_state_dict_file, open_checkpoint  # noqa: F401
from .checkpoint import CheckpointMismatchError  # noqa: F401
from .inference import (build_from_config, drop_pretrained_init, is_segmentor_config, load_model,  # noqa: F401
                        resolve_checkpoint, segmentor_inference_weights)
from .train import TrainingRefused, train  # noqa: F401
from .convert import ConversionError, convert_checkpoint  # noqa: F401
from .visualize import draw_attention, draw_mim, draw_token_maps, draw_tokens  # noqa: F401
