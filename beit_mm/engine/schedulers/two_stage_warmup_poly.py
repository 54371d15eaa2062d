"""EoMT's learning-rate schedule (tue-mps/eomt@7bd19dd): a two-stage linear warmup, then polynomial decay.

With ``W0, W1 = warmup_steps``, ``T`` total optimizer updates, ``p`` the poly power and ``t`` the updates done:

- non-backbone groups: ``base * t / W0`` while ``t < W0``, then ``base * (1 - (t - W0) / max(1, T - W0)) ** p``;
- backbone groups (:data:`BACKBONE_GROUP_KEY`): 0 while ``t < W0``, ``base * (t - W0) / W1`` while ``t < W0 + W1``,
  then ``base * (1 - (t - W0 - W1) / max(1, T - W0 - W1)) ** p``.
"""
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from beit_mm.registry import PARAM_SCHEDULERS

from ..optim_updates import accumulative_counts, total_updates, updates_done

BACKBONE_GROUP_KEY = 'is_backbone'


def two_stage_warmup_poly_factor(step: int, is_backbone: bool, warmup_steps: tuple[int, int], total_steps: int,
                                 poly_power: float) -> float:
    """The factor of a group's base lr after ``step`` optimizer steps."""
    non_backbone_warmup, backbone_warmup = warmup_steps
    if not is_backbone:
        if non_backbone_warmup > 0 and step < non_backbone_warmup:
            return step / non_backbone_warmup
        done, span = step - non_backbone_warmup, total_steps - non_backbone_warmup
    else:
        if step < non_backbone_warmup:
            return 0.0
        if step < non_backbone_warmup + backbone_warmup:
            return (step - non_backbone_warmup) / backbone_warmup
        done, span = step - non_backbone_warmup - backbone_warmup, total_steps - non_backbone_warmup - backbone_warmup
    return (1 - max(0, done) / max(1, span))**poly_power


@PARAM_SCHEDULERS.register_module()
class TwoStageWarmupPolyLR(LRSchedulerMixin, _ParamScheduler):
    """EoMT's two-stage warmup + poly learning-rate schedule; iteration ``i`` from ``begin`` trains at ``t = i // A``
    updates (``A`` the wrapper's ``accumulative_counts``).

    Args:
        optimizer: the optim wrapper (or optimizer) whose param groups all carry :data:`BACKBONE_GROUP_KEY`.
        warmup_steps: ``(W0, W1)`` optimizer updates: the heads' warmup, then the backbone's.
        poly_power: ``p``.
        begin, end: iterations where the schedule starts and ends; ``end`` is required, ``begin`` a multiple of ``A``.
        last_step, by_epoch, verbose: as MMEngine's schedulers; only ``by_epoch=False`` is accepted.
    """

    def __init__(self,
                 optimizer,
                 warmup_steps: tuple[int, int],
                 poly_power: float = 0.9,
                 begin: int = 0,
                 end: int = INF,
                 last_step: int = -1,
                 by_epoch: bool = False,
                 verbose: bool = False) -> None:
        if by_epoch:
            raise ValueError('TwoStageWarmupPolyLR is iteration based (the official schedule steps every optimizer '
                             'step); set by_epoch=False, warmup_steps in optimizer updates and end in iterations')
        if end >= INF:
            raise ValueError('TwoStageWarmupPolyLR needs end (the last iteration, e.g. end=max_iters): its poly decay '
                             'reaches 0 there')
        if len(warmup_steps) != 2 or any(not isinstance(w, int) or w < 0 for w in warmup_steps):
            raise ValueError(f'warmup_steps={warmup_steps!r} must be two non-negative ints: (heads\' warmup, '
                             'backbone\'s warmup after it)')
        # an OptimWrapper's trailing logging-only group is untagged and follows the non-backbone rule
        real_groups = getattr(optimizer, 'optimizer', optimizer).param_groups
        untagged = [i for i, group in enumerate(real_groups) if BACKBONE_GROUP_KEY not in group]
        if untagged:
            raise ValueError(f'param groups {untagged} have no {BACKBONE_GROUP_KEY!r} key, so TwoStageWarmupPolyLR '
                             'cannot tell backbone groups from the rest; build the optimizer with '
                             "constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor'")
        self.accumulative_counts = accumulative_counts(optimizer)
        if begin % self.accumulative_counts:
            raise ValueError(f'TwoStageWarmupPolyLR begins at iteration {begin}, inside an optimizer update of '
                             f'{self.accumulative_counts} accumulated iterations; give a begin that is a multiple of '
                             'optim_wrapper.accumulative_counts')
        self.warmup_steps = (int(warmup_steps[0]), int(warmup_steps[1]))
        self.poly_power = float(poly_power)
        self.total_steps = total_updates(end - begin, self.accumulative_counts)
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step, by_epoch=False, verbose=verbose)

    def _get_value(self) -> list[float]:
        step = updates_done(self.last_step, self.accumulative_counts)
        return [
            base * two_stage_warmup_poly_factor(step, group.get(BACKBONE_GROUP_KEY, False),
                                                self.warmup_steps, self.total_steps, self.poly_power)
            for base, group in zip(self.base_values, self.optimizer.param_groups)
        ]
