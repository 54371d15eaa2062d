from .batch_size_check import BatchSizeCheckHook, batch_size_warning, effective_batch_size  # noqa: F401
from .dvae_schedule import DVAEScheduleHook, cosine_anneal  # noqa: F401
from .tokenizer_eval import TokenizerEvalHook  # noqa: F401
