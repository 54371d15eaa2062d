"""Temperature and KL-weight cosine annealing for ``beit_mm.DVAE`` (DALL-E paper, appendix A.2)."""
import math

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS


def cosine_anneal(start: float, end: float, iteration: int, num_iters: int) -> float:
    """Half-cosine from ``start`` (iteration 0) to ``end`` (iteration >= ``num_iters``); ``end`` if num_iters <= 0."""
    if num_iters <= 0:
        return end
    t = min(max(iteration, 0), num_iters) / num_iters
    return end + (start - end) * 0.5 * (1 + math.cos(math.pi * t))


@HOOKS.register_module()
class DVAEScheduleHook(Hook):
    """Sets ``model.temperature`` and ``model.kl_weight`` of a ``beit_mm.DVAE`` before every training iteration.

    Args:
        temperature: (start, end) Gumbel-softmax temperature.
        temperature_iters: iterations of the temperature annealing.
        kl_weight: (start, end) KL weight beta.
        kl_weight_iters: iterations of the KL-weight annealing.

    It writes model attributes because ``train_step`` is not given the iteration; a pure function of ``runner.iter``,
    so a resumed run continues the schedule.
    """

    priority = 'NORMAL'

    def __init__(self,
                 temperature: tuple[float, float] = (1.0, 1 / 16),
                 temperature_iters: int = 150_000,
                 kl_weight: tuple[float, float] = (0.0, 6.6),
                 kl_weight_iters: int = 5_000) -> None:
        if min(temperature) <= 0:
            raise ValueError(f'temperature={temperature}: Gumbel-softmax temperatures must be > 0')
        self.temperature = tuple(temperature)
        self.temperature_iters = temperature_iters
        self.kl_weight = tuple(kl_weight)
        self.kl_weight_iters = kl_weight_iters

    def values(self, iteration: int) -> tuple[float, float]:
        """(temperature, kl_weight) at ``iteration`` (0-based)."""
        return (cosine_anneal(*self.temperature, iteration, self.temperature_iters),
                cosine_anneal(*self.kl_weight, iteration, self.kl_weight_iters))

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not (hasattr(model, 'temperature') and hasattr(model, 'kl_weight')):
            raise TypeError(f'DVAEScheduleHook needs a model with temperature and kl_weight (beit_mm.DVAE), got '
                            f'{type(model).__name__}; remove the hook from custom_hooks')
        model.temperature, model.kl_weight = self.values(runner.iter)
        runner.message_hub.update_scalar('train/temperature', model.temperature)
        runner.message_hub.update_scalar('train/kl_weight', model.kl_weight)
