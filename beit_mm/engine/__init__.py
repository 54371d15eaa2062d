from . import hooks, optimizers, schedulers  # noqa: F401
from . import amp_optim_wrapper  # noqa: F401
from .config_text import memoize_config_formatting

memoize_config_formatting()  # a Runner formats its config text ~9 times
