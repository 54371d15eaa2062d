"""EoMT's learning-rate schedule: a two-stage linear warmup, then polynomial decay, per optimizer update.

The official rule (github.com/tue-mps/eomt at ``7bd19dd``, ``training/two_stage_warmup_poly_schedule.py:26-49``),
with ``W0, W1 = warmup_steps``, ``T`` the total number of optimizer updates, ``p`` the poly power and ``t`` the
updates done (0 for the first update; Lightning's ``global_step``, which gradient accumulation does not advance
between updates: :mod:`beit_mm.engine.optim_updates`):

- groups outside the backbone (queries, heads): ``base * t / W0`` while ``t < W0`` (when ``W0 > 0``), then
  ``base * (1 - (t - W0) / max(1, T - W0)) ** p``;
- backbone groups: 0 while ``t < W0`` (the new heads train alone first), ``base * (t - W0) / W1`` while
  ``t < W0 + W1``, then ``base * (1 - (t - W0 - W1) / max(1, T - W0 - W1)) ** p``.

``base`` is each group's own initial lr (layer decay already applied, ``initial_lr`` in MMEngine's terms). Which
groups are the backbone's is told by the group key :data:`BACKBONE_GROUP_KEY`, which
:class:`beit_mm.engine.optimizers.EoMTLayerDecayOptimWrapperConstructor` sets (the official code counts them instead:
the first ``num_backbone_params`` groups, ``lightning_module.py:151-156``).
"""
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from beit_mm.registry import PARAM_SCHEDULERS

from ..optim_updates import accumulative_counts, total_updates, updates_done

#: Param-group key: True for groups of backbone parameters (two-stage warmup), False for the rest (one-stage warmup).
BACKBONE_GROUP_KEY = 'is_backbone'


def two_stage_warmup_poly_factor(step: int, is_backbone: bool, warmup_steps: tuple[int, int], total_steps: int,
                                 poly_power: float) -> float:
    """The factor of a group's base lr after ``step`` optimizer steps (the module docstring's rule)."""
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
    """EoMT's two-stage warmup + poly learning-rate schedule, counted in optimizer updates.

    Config::

        param_scheduler = [dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9,
                                by_epoch=False, begin=0, end=max_iters)]

    MMEngine steps it every iteration; with the optim wrapper's ``accumulative_counts = A`` (read from the wrapper it
    is built on) iteration ``i`` from ``begin`` trains with the rule at ``t = i // A`` updates, and ``T`` is
    ``ceil((end - begin) / A)`` updates, so the optimizer step that ends update ``t`` uses the lr the official
    scheduler gives after ``t`` optimizer steps (stepped after each, Lightning's ``interval: 'step'``,
    ``lightning_module.py:162-168``): a 4-image x 4-accumulation run follows the batch-16 run's curve update by
    update. ``warmup_steps`` are optimizer updates (the official values hold at any ``A``); ``begin`` and ``end`` are
    iterations, as for every MMEngine scheduler (``end=max_iters``).

    Args:
        optimizer: the optim wrapper (or optimizer) whose param groups all carry :data:`BACKBONE_GROUP_KEY`.
        warmup_steps: ``(W0, W1)`` optimizer updates: the heads' warmup, then the backbone's (official default
            ``[500, 1000]``, ``training/mask_classification_semantic.py:34``).
        poly_power: ``p`` (official default 0.9, ``mask_classification_semantic.py:33``).
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
        # an OptimWrapper's param_groups end with a logging-only entry without parameters (its
        # ``base_param_settings``, logged as ``base_lr``): untagged, it follows the non-backbone rule, so ``base_lr``
        # shows the full lr's schedule
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
