"""Model loading for every tool (as mmseg's ``mmseg/apis/inference.py``): build a config's model without the official
files its ``init_cfg`` names, resolve a checkpoint or a work dir, load a training checkpoint. Used by the pictures,
``tools/infer.py``, ``tools/analysis/get_flops.py``, the export and the probe."""
from .inference import build_from_config, drop_pretrained_init, load_model, resolve_checkpoint  # noqa: F401
