"""The training step for EoMT's mask annealing (``beit_mm.models.segmentors.mask_annealing``)."""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS

from ..optim_updates import accumulative_counts, updates_done


@HOOKS.register_module()
class EoMTMaskAnnealingHook(Hook):
    """Before every training iteration, gives a ``beit_mm.EoMT`` the number of optimizer updates done
    (``runner.iter // A`` with the optim wrapper's ``accumulative_counts = A``, :mod:`beit_mm.engine.optim_updates`),
    from which it sets its masked blocks' probabilities; the official code does the same after each batch from
    Lightning's ``global_step``, which counts optimizer steps (``training/lightning_module.py:211-224``), so every
    micro-batch of the update after ``t`` updates uses the rule at ``t``, as the batch-``A x b`` run's batch ``t``.

    Like ``DVAEScheduleHook`` this writes the model's state (the ``attn_mask_probs`` buffer, checkpointed) because
    ``train_step`` is not given the iteration; the values are a pure function of ``runner.iter``, so a resumed run
    continues the schedule. They are logged as ``attn_mask_prob_<j>``, one per masked block."""

    priority = 'NORMAL'

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if not hasattr(model, 'set_annealing_step'):
            raise TypeError(f'EoMTMaskAnnealingHook needs a beit_mm.EoMT model, got {type(model).__name__}; remove '
                            'the hook from custom_hooks')
        model.set_annealing_step(updates_done(runner.iter, accumulative_counts(runner.optim_wrapper)))
        for j, prob in enumerate(model.attn_mask_probs.tolist()):
            runner.message_hub.update_scalar(f'train/attn_mask_prob_{j}', prob)
