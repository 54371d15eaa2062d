from . import hooks, optimizers  # noqa: F401
from . import amp_optim_wrapper, checkpoint  # noqa: F401
