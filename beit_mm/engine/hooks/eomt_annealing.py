"""The training step for EoMT's mask annealing (``beit_mm.models.segmentors.mask_annealing``)."""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS


@HOOKS.register_module()
class EoMTMaskAnnealingHook(Hook):
    """Before every training iteration, gives a ``beit_mm.EoMT`` the number of optimizer steps done
    (``runner.iter``), from which it sets its masked blocks' probabilities; the official code does the same after each
    step (``training/lightning_module.py:211-224``), so the batch after ``t`` steps uses the rule at ``t``.

    Like ``DVAEScheduleHook`` this writes the model's state (the ``attn_mask_probs`` buffer, checkpointed) because
    ``train_step`` is not given the iteration; the values are a pure function of ``runner.iter``, so a resumed run
    continues the schedule. They are logged as ``attn_mask_prob_<j>``, one per masked block."""

    priority = 'NORMAL'

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not hasattr(model, 'set_annealing_step'):
            raise TypeError(f'EoMTMaskAnnealingHook needs a beit_mm.EoMT model, got {type(model).__name__}; remove '
                            'the hook from custom_hooks')
        model.set_annealing_step(runner.iter)
        for j, prob in enumerate(model.attn_mask_probs.tolist()):
            runner.message_hub.update_scalar(f'train/attn_mask_prob_{j}', prob)
