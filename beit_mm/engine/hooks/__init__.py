from .dvae_schedule import DVAEScheduleHook, cosine_anneal  # noqa: F401
from .tokenizer_eval import TokenizerEvalHook  # noqa: F401
