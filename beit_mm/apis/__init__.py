"""Checkpoint opening and model loading for every tool (as mmseg's ``mmseg/apis/inference.py``): open a checkpoint
safely (:mod:`.checkpoint`, also MMEngine's loader of local files), build a config's model without the official files
its ``init_cfg`` names, resolve a checkpoint or a work dir, load a training checkpoint. Used by the pictures,
``tools/infer.py``, ``tools/analysis/get_flops.py``, the export, the converters and the probe."""
from .checkpoint import (CheckpointFileError, CheckpointMismatchError, load_state_dict_file,  # noqa: F401
                         open_checkpoint, register_mmengine_loader)
from .inference import (build_from_config, drop_pretrained_init, is_segmentor_config, load_model,  # noqa: F401
                        resolve_checkpoint, segmentor_inference_weights)

register_mmengine_loader()
