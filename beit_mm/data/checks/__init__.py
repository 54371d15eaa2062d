"""Checks before a run: a segmentation split's files and labels, a config's data folders, and the hand-over of
augmentation parameters from the worker to the data preprocessor. Each failure is an error naming the files or keys,
their count and the fix."""
from .config import (EVALUATOR_INPUTS, check_evaluator_files, check_split_folders, config_data_roots,  # noqa: F401
                     dataset_configs, evaluator_metrics, warn_unread_data_root)
from .files import (EXIF_ORIENTATION, check_loaded_pair, check_pair, image_annotation_problem,  # noqa: F401
                    exif_orientation, loaded_size, loader_applies_orientation)
from .handover import HandoverError, check_handover, check_pipeline  # noqa: F401
from .labels import (DatasetCheckError, LabelRule, Problem, check_label_values, file_problems,  # noqa: F401
                     label_problems, void_verdict, void_warning)
from .splits import (DEFAULT_NUM_SAMPLES, SplitInfo, check_seg_dataset, check_split, config_head_classes,  # noqa: F401
                     head_classes_problem, leaf_datasets, model_head_classes, pipeline_loader, sample_indices,
                     split_info)
