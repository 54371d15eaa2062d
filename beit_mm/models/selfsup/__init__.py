from .beit_mim import BEiTPretrain  # noqa: F401
from .data_preprocessor import MIMDataPreprocessor  # noqa: F401
