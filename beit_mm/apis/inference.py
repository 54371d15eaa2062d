"""Model loading for the entry points: the config's model built and its checkpoint checked
(:mod:`beit_mm.models.builder`)."""
from ..models.builder import (CLASSIFIER_INFERENCE_WEIGHTS, ENCODER_DECODER_INFERENCE_WEIGHTS,  # noqa: F401
                              FOREIGN_INFERENCE_WEIGHTS, build_from_config, check_loaded_weights,
                              declared_inference_weights, drop_pretrained_init, inference_weights, is_segmentor_config,
                              load_model, model_class, resolve_checkpoint, segmentor_inference_weights)
