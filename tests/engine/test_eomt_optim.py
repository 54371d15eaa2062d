"""EoMT's optimizer groups (beit_mm.EoMTLayerDecayOptimWrapperConstructor) and lr schedule
(beit_mm.TwoStageWarmupPolyLR) against the official rules, restated here from the official code,
github.com/tue-mps/eomt at 7bd19ddd621c5c6adedcd260458a34783cd4a45f (file:line per function), not read from the
modules under test.

Each test was seen failing with a deliberate error in the module under test (the commit message lists them).
"""
import math

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.optim import build_optim_wrapper

from beit_mm.registry import MODELS, PARAM_SCHEDULERS

BASE_LR, WD, LLRD = 1e-4, 0.05, 0.8
DEPTH, NUM_L2 = 4, 2


def tiny_eomt() -> torch.nn.Module:
    """4 blocks, the last 2 seeing the queries; absolute and shared relative position tables and a mask token, so
    every kind of backbone parameter a BEiT can hold is present."""
    torch.manual_seed(0)
    return MODELS.build(
        dict(type='beit_mm.EoMT', num_classes=5, num_queries=3, num_blocks=NUM_L2,
             backbone=dict(type='beit_mm.BEiT', arch=dict(embed_dims=16, num_layers=DEPTH, num_heads=2, mlp_ratio=2.0),
                           img_size=32, patch_size=8, use_abs_pos_emb=True, use_rel_pos_bias=False,
                           use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True, drop_path_rate=0.0),
             loss=dict(type='beit_mm.MaskClassificationLoss', num_classes=5, num_points=64)))


def optim_wrapper(model, **paramwise):
    return build_optim_wrapper(model, dict(
        type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD),
        constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
        paramwise_cfg=dict(layer_decay_rate=LLRD, **paramwise)))


def official_lrs(model, lr: float, llrd: float, llrd_l2_enabled: bool, lr_mult: float = 1.0) -> dict[str, float]:
    """``training/lightning_module.py:102-149`` (``configure_optimizers``) restated on ``model.named_parameters()``:
    the official ``network.encoder.backbone.`` prefix is beit_mm's ``backbone.``, ``backbone.blocks`` is
    ``len(model.backbone.blocks)`` and ``network.num_blocks`` is ``model.num_blocks``."""
    backbone_blocks = len(model.backbone.blocks)  # :108
    block_i = backbone_blocks  # :109
    l2_blocks = list(range(backbone_blocks - model.num_blocks, backbone_blocks))  # :111-113
    out = {}
    for name, _ in reversed(list(model.named_parameters())):  # :115
        param_lr = lr  # :116
        if name.startswith('backbone.'):  # :118
            name_list = name.split('.')  # :119
            is_block = False
            for i, key in enumerate(name_list):  # :122-125
                if key == 'blocks':
                    block_i = int(name_list[i + 1])
                    is_block = True
            if is_block or block_i == 0:  # :127-128
                param_lr *= llrd**(backbone_blocks - 1 - block_i)
            elif (is_block or block_i == 0) and lr_mult != 1.0:  # :130-131 (never reached)
                param_lr *= lr_mult
            if 'backbone.norm' in name:  # :133-134
                param_lr = lr
            if is_block and block_i in l2_blocks and ((not llrd_l2_enabled) or (lr_mult != 1.0)):  # :136-141
                param_lr = lr
        out[name] = param_lr  # :143-149
    return out


def per_param(optimizer, model) -> dict[str, tuple[float, float, bool]]:
    """name -> (lr, weight decay, backbone tag) of every parameter, each in exactly one group."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for group in optimizer.param_groups:
        for p in group['params']:
            assert names[id(p)] not in out, f'{names[id(p)]} is in two groups'
            out[names[id(p)]] = (group['lr'], group['weight_decay'], group['is_backbone'])
    return out


@pytest.mark.parametrize('llrd_l2_enabled', [True, False])
def test_every_parameter_gets_the_official_lr_and_weight_decay(llrd_l2_enabled):
    """lr per parameter as ``lightning_module.py:102-149``; weight decay 0.05 on every parameter, norms, biases,
    tokens and position tables included (``AdamW(param_groups, weight_decay=self.weight_decay)``, :152, groups
    without their own value); backbone tag exactly on the backbone's parameters (the official scheduler's backbone
    groups are ``backbone_param_groups``, :143-156)."""
    model = tiny_eomt()
    got = per_param(optim_wrapper(model, llrd_l2_enabled=llrd_l2_enabled).optimizer, model)
    want = official_lrs(model, BASE_LR, LLRD, llrd_l2_enabled)
    assert set(got) == set(want) == {n for n, _ in model.named_parameters()}
    for name, (lr, wd, is_backbone) in got.items():
        assert math.isclose(lr, want[name], rel_tol=1e-12), (name, lr, want[name])
        assert wd == WD, name
        assert is_backbone == name.startswith('backbone.'), name
    # the rule's cases, so a restatement that drifted from the official would show here too
    first_block = LLRD**(DEPTH - 1)
    for name in ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed', 'backbone.patch_embed.proj.weight',
                 'backbone.rel_pos_bias.relative_position_bias_table', 'backbone.blocks.0.attn.qkv.weight'):
        assert math.isclose(got[name][0], BASE_LR * first_block), name
    assert math.isclose(got['backbone.blocks.1.mlp.fc1.weight'][0], BASE_LR * LLRD**2)
    l2_scale = 1.0 if not llrd_l2_enabled else LLRD
    assert math.isclose(got['backbone.blocks.2.attn.proj.bias'][0], BASE_LR * l2_scale)
    for name in ('backbone.blocks.3.gamma_1', 'backbone.norm.weight', 'q.weight', 'class_head.bias',
                 'mask_head.4.weight', 'upscale.0.conv1.weight'):
        assert got[name][0] == BASE_LR, name


def test_official_lr_mult_is_refused_with_its_equivalent():
    """``lr_mult`` never multiplies in the official code (``lightning_module.py:130`` repeats :127's condition); its
    only effect, the L2 exception (:139), is ``llrd_l2_enabled=False``: the restated rule agrees."""
    model = tiny_eomt()
    assert official_lrs(model, BASE_LR, LLRD, True, lr_mult=0.1) == official_lrs(model, BASE_LR, LLRD, False)
    with pytest.raises(ValueError, match='lr_mult'):
        optim_wrapper(model, lr_mult=0.1)


def official_schedule(step: int, base_lr: float, is_backbone: bool, warmup_steps, total_steps: int,
                      poly_power: float) -> float:
    """``training/two_stage_warmup_poly_schedule.py:26-49`` (``get_lr``) for one group."""
    non_vit_warmup, vit_warmup = warmup_steps  # :29
    if not is_backbone:  # :31 (i >= num_backbone_params)
        if non_vit_warmup > 0 and step < non_vit_warmup:
            return base_lr * (step / non_vit_warmup)
        adjusted = max(0, step - non_vit_warmup)
        max_steps = max(1, total_steps - non_vit_warmup)
        return base_lr * (1 - (adjusted / max_steps))**poly_power
    if step < non_vit_warmup:  # :39-46
        return 0
    if step < non_vit_warmup + vit_warmup:
        return base_lr * ((step - non_vit_warmup) / vit_warmup)
    adjusted = max(0, step - non_vit_warmup - vit_warmup)
    max_steps = max(1, total_steps - non_vit_warmup - vit_warmup)
    return base_lr * (1 - (adjusted / max_steps))**poly_power


def test_every_group_follows_the_official_schedule_at_every_step():
    """Warmup (3, 5), 20 steps, poly 0.9, through a real OptimWrapper (AdamW updates) and the scheduler's own
    ``step()`` after each update, as MMEngine's ParamSchedulerHook does: at every step each group's lr is the official
    ``get_lr`` at that step (Lightning steps it after each optimizer step and starts at step 0,
    ``lightning_module.py:162-168``); the backbone does not move during the first stage (lr 0), the heads do."""
    warmup, total, power = (3, 5), 20, 0.9
    model = tiny_eomt()
    wrapper = optim_wrapper(model)
    scheduler = PARAM_SCHEDULERS.build(
        dict(type='TwoStageWarmupPolyLR', warmup_steps=warmup, poly_power=power, by_epoch=False, begin=0, end=total),
        default_args=dict(optimizer=wrapper))
    groups = wrapper.optimizer.param_groups  # the wrapper's param_groups add a logging-only entry (base_lr)
    names = {id(p): n for n, p in model.named_parameters()}
    backbone = [all(names[id(p)].startswith('backbone.') for p in g['params']) for g in groups]
    assert any(backbone) and not all(backbone)
    want_lrs = official_lrs(model, BASE_LR, LLRD, True)
    base = [want_lrs[names[id(g['params'][0])]] for g in groups]
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    for step in range(total):
        for i, group in enumerate(groups):
            want = official_schedule(step, base[i], backbone[i], warmup, total, power)
            assert math.isclose(group['lr'], want, rel_tol=1e-12, abs_tol=1e-20), (step, group['group_name'])
        # MMEngine logs base_lr (the optimizer's own lr): the full lr's schedule, as the heads'
        want = official_schedule(step, BASE_LR, False, warmup, total, power)
        assert math.isclose(wrapper.get_lr()['base_lr'][0], want, rel_tol=1e-12, abs_tol=1e-20), step
        if step == warmup[0]:  # the backbone has not moved in stage 1, the heads have
            for n, p in model.named_parameters():
                assert torch.equal(p, start[n]) == n.startswith('backbone.'), n
        loss = sum(p.sum() for p in model.parameters())  # gradient 1 everywhere: every parameter with lr > 0 moves
        wrapper.update_params(loss)
        scheduler.step()


@pytest.mark.parametrize('kwargs, match', [
    (dict(warmup_steps=(3, 5), by_epoch=True, end=20), 'iteration based'),
    (dict(warmup_steps=(3, 5), by_epoch=False), 'needs end'),
    (dict(warmup_steps=(500, ), by_epoch=False, end=20), 'two non-negative ints'),
])
def test_scheduler_refuses_what_it_cannot_follow(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PARAM_SCHEDULERS.build(dict(type='TwoStageWarmupPolyLR', **kwargs),
                               default_args=dict(optimizer=optim_wrapper(tiny_eomt())))


def test_scheduler_needs_tagged_groups():
    """Groups from another constructor carry no backbone tag: refused instead of warming every group as heads."""
    model = tiny_eomt()
    plain = build_optim_wrapper(model, dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR)))
    with pytest.raises(ValueError, match='EoMTLayerDecayOptimWrapperConstructor'):
        PARAM_SCHEDULERS.build(dict(type='TwoStageWarmupPolyLR', warmup_steps=(3, 5), by_epoch=False, end=20),
                               default_args=dict(optimizer=plain))


# ---- schedules under gradient accumulation ----------------------------------------------------------------------
UPDATES, ACC_WARMUP, ANNEAL_START, ANNEAL_END = 8, (2, 2), [1, 3], [3, 6]


class _ScheduleRecorder(Hook):
    """Records, through torch's own hooks, each group's lr when the optimizer really steps and the annealing
    probabilities each forward of the model uses."""

    def __init__(self) -> None:
        self.steps, self.forwards = [], []

    def before_train(self, runner) -> None:
        optimizer = runner.optim_wrapper.optimizer
        optimizer.register_step_pre_hook(
            lambda opt, args, kwargs: self.steps.append([(g['lr'], g['is_backbone']) for g in opt.param_groups]))
        runner.model.register_forward_pre_hook(
            lambda module, args: self.forwards.append(module.attn_mask_probs.tolist()))


def _train_and_record(tmp_path, batch_size: int, counts: int) -> _ScheduleRecorder:
    """``tiny_eomt`` trained by MMEngine's Runner for ``UPDATES`` optimizer updates of ``batch_size`` images x
    ``counts`` accumulated iterations, with the official schedule's structure: warmup ``ACC_WARMUP`` and annealing
    ``ANNEAL_START``/``ANNEAL_END`` in optimizer updates, as the official configs give them, ``end = max_iters``."""
    from mmengine.dataset import pseudo_collate
    from mmengine.runner import Runner
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    g = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(16 * UPDATES):  # one pass: MMEngine sleeps 2 s each time a finite loader restarts
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 2, (1, 32, 32), generator=g))
        sample.set_metainfo(dict(img_shape=(32, 32), ori_shape=(32, 32), pad_shape=(32, 32)))
        samples.append(dict(inputs=torch.randint(0, 256, (3, 32, 32), generator=g, dtype=torch.uint8),
                            data_samples=sample))
    model = tiny_eomt()
    model.mask_annealing = dict(start_steps=ANNEAL_START, end_steps=ANNEAL_END, poly_power=0.9)
    model.data_preprocessor = MODELS.build(
        dict(type='mmseg.SegDataPreProcessor', mean=[0.0] * 3, std=[255.0] * 3, size=(32, 32)))
    max_iters = UPDATES * counts
    recorder = _ScheduleRecorder()
    runner = Runner(
        model=model, work_dir=str(tmp_path / f'b{batch_size}x{counts}'), experiment_name=f'acc_{batch_size}x{counts}',
        train_dataloader=torch.utils.data.DataLoader(samples, batch_size=batch_size, shuffle=False,
                                                     collate_fn=pseudo_collate),
        optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD),
                           accumulative_counts=counts, constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
                           paramwise_cfg=dict(layer_decay_rate=LLRD)),
        param_scheduler=[dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=ACC_WARMUP, poly_power=0.9,
                              by_epoch=False, begin=0, end=max_iters)],
        train_cfg=dict(by_epoch=False, max_iters=max_iters),
        default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=max_iters)),
        custom_hooks=[dict(type='beit_mm.EoMTMaskAnnealingHook'), recorder], default_scope='mmseg')
    runner.train()
    return recorder


def test_accumulated_run_follows_the_batch_16_schedules_update_by_update(tmp_path):
    """Issue 41 (tue-mps/eomt#72): a total batch of 16 as 4 images x 4 accumulated iterations. At every optimizer
    step each group's lr equals the batch-16 run's at the same update, and every forward of the update's 4
    micro-batches uses the annealing probabilities of the batch-16 run's forward of that update: the whole curves,
    warmups, poly decay to the last update and annealing included. The batch-16 run itself is checked against the
    official rules (``official_schedule``; ``lightning_module.py:199-209`` as ``official_probability``), and each
    batch-16 step/forward is one update of the official run (``global_step``)."""
    from ..models.test_mask_annealing import official_probability
    whole = _train_and_record(tmp_path, batch_size=16, counts=1)
    accumulated = _train_and_record(tmp_path, batch_size=4, counts=4)
    assert len(whole.steps) == len(accumulated.steps) == UPDATES
    assert len(whole.forwards) == UPDATES and len(accumulated.forwards) == 4 * UPDATES
    base = [lr for lr, _ in whole.steps[-1]]  # poly decays every group to base * (1 / T') ** 0.9 > 0 at the last
    for k in range(UPDATES):
        assert accumulated.steps[k] == whole.steps[k], k
        assert accumulated.forwards[4 * k:4 * k + 4] == [whole.forwards[k]] * 4, k
        for j, (start, end) in enumerate(zip(ANNEAL_START, ANNEAL_END)):
            assert whole.forwards[k][j] == pytest.approx(official_probability(start, k, end), abs=1e-6), (k, j)
    model = tiny_eomt()
    wrapper = optim_wrapper(model)
    names = {id(p): n for n, p in model.named_parameters()}
    want_base = official_lrs(model, BASE_LR, LLRD, True)
    for i, group in enumerate(wrapper.optimizer.param_groups):
        for k in range(UPDATES):
            lr, is_backbone = whole.steps[k][i]
            want = official_schedule(k, want_base[names[id(group['params'][0])]], is_backbone, ACC_WARMUP, UPDATES,
                                     0.9)
            assert math.isclose(lr, want, rel_tol=1e-12, abs_tol=1e-20), (k, i, lr, want, base[i])
    seen = {(j, 0.0 < f[j] < 1.0) for f in whole.forwards for j in range(2)}
    assert seen == {(0, True), (0, False), (1, True), (1, False)}  # each block seen annealing and not


def test_scheduler_refuses_a_begin_inside_an_update():
    wrapper = build_optim_wrapper(tiny_eomt(), dict(
        type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD), accumulative_counts=4,
        constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor', paramwise_cfg=dict(layer_decay_rate=LLRD)))
    with pytest.raises(ValueError, match='multiple of optim_wrapper.accumulative_counts'):
        PARAM_SCHEDULERS.build(dict(type='TwoStageWarmupPolyLR', warmup_steps=(3, 5), by_epoch=False, begin=2,
                                    end=20), default_args=dict(optimizer=wrapper))
