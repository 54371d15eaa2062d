from .data_preprocessor import AugmentClsDataPreprocessor  # noqa: F401
