"""EoMT's optimizer groups (beit_mm.EoMTLayerDecayOptimWrapperConstructor) and lr schedule
(beit_mm.TwoStageWarmupPolyLR) against the official rules, restated here from the official code,
github.com/tue-mps/eomt at 7bd19ddd621c5c6adedcd260458a34783cd4a45f (file:line per function), not read from the
modules under test.

Each test was seen failing with a deliberate error in the module under test (the commit message lists them).
"""
import math

import pytest
import torch
from mmengine.optim import build_optim_wrapper

from beit_mm.registry import MODELS, PARAM_SCHEDULERS

BASE_LR, WD, LLRD = 1e-4, 0.05, 0.8
DEPTH, NUM_L2 = 4, 2


def tiny_eomt() -> torch.nn.Module:
    """4 blocks, the last 2 seeing the queries; absolute and shared relative position tables and a mask token, so
    every kind of backbone parameter a BEiT can hold is present."""
    torch.manual_seed(0)
    return MODELS.build(
        dict(type='EoMT', num_classes=5, num_queries=3, num_blocks=NUM_L2,
             backbone=dict(type='BEiT', arch=dict(embed_dims=16, num_layers=DEPTH, num_heads=2, mlp_ratio=2.0),
                           img_size=32, patch_size=8, use_abs_pos_emb=True, use_rel_pos_bias=False,
                           use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True, drop_path_rate=0.0),
             loss=dict(type='MaskClassificationLoss', num_classes=5, num_points=64)))


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
