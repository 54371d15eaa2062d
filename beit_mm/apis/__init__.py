"""The library's entry points, as mmseg's ``mmseg.apis``: model loading, training, testing, inference, conversion
and export."""
from ..fileio import CheckpointFileError, load_state_dict_file, open_checkpoint  # noqa: F401
from .checkpoint import CheckpointMismatchError  # noqa: F401
from .inference import (build_from_config, drop_pretrained_init, is_segmentor_config, load_model,  # noqa: F401
                        resolve_checkpoint, segmentor_inference_weights)
from .train import TrainingRefused, train  # noqa: F401
from .convert import ConversionError, convert_checkpoint  # noqa: F401
from .onnx_inference import exported_shape, infer_onnx, run_windows  # noqa: F401
from .segment import infer_images, run_infer  # noqa: F401
from .testing import RunTestRefused, run_test, slide_tta_pipeline  # noqa: F401
