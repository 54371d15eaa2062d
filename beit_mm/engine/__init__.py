from . import hooks, optimizers, schedulers  # noqa: F401
from . import amp_optim_wrapper  # noqa: F401
