"""The training step for EoMT's mask annealing (``beit_mm.models.segmentors.mask_annealing``)."""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS

from ..optim_updates import accumulative_counts, updates_done


@HOOKS.register_module()
class EoMTMaskAnnealingHook(Hook):
    """Before every training iteration, give a ``beit_mm.EoMT`` the optimizer updates done, from which it sets its
    masked blocks' probabilities (logged as ``attn_mask_prob_<j>``); a pure function of ``runner.iter``."""

    priority = 'NORMAL'

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not hasattr(model, 'set_annealing_step'):
            raise TypeError(f'EoMTMaskAnnealingHook needs a beit_mm.EoMT model, got {type(model).__name__}; remove '
                            'the hook from custom_hooks')
        model.set_annealing_step(updates_done(runner.iter, accumulative_counts(runner.optim_wrapper)))
        for j, prob in enumerate(model.attn_mask_probs.tolist()):
            runner.message_hub.update_scalar(f'train/attn_mask_prob_{j}', prob)
