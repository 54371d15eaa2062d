# The 64 px demos' optimizer and schedule, shared by the BEiT UPerNet, EoMT and Mask2Former demos
# (configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py and its EoMT / Mask2Former counterparts), so that
# tools/analysis/head_study.py compares heads under one budget: AdamW 2e-3 with layer decay 0.9, 50 warmup steps, then
# linear decay to 0 at 1000 iterations; validation and a checkpoint every 500.
_base_ = ['./schedule_160k.py']
base_lr = 2e-3
max_iters = 1000
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.9,
        bias_decay_mult=0.0,
        norm_decay_mult=0.0,
        no_decay_names=('cls_token', 'mask_token', 'pos_embed', 'relative_position_bias_table', 'gamma_1', 'gamma_2',
                        'q_bias', 'v_bias')))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=50, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=500)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=500, max_keep_ckpts=2, save_best=None))
