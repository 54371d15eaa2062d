# Demo: a tiny BEiT (4 blocks, 96 wide, 8x8-pixel patches) + UPerNet trained FROM SCRATCH (no pretrained checkpoint,
# on purpose) on the generated ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x 8 images,
# 1k iterations, 64x64 crops. Runs on 2 CPU cores in minutes: bash tools/run_demo.sh
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 96
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3)),
    neck=dict(embed_dim=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=[embed_dims] * 4, channels=32, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=16, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
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
    # no best-checkpoint selection: tools/run_demo.sh reports the last checkpoint on the validation split
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=500, max_keep_ckpts=2, save_best=None))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
# Seeded and deterministic: the same machine (and thread count) prints the same mIoU every run.
randomness = dict(seed=0, deterministic=True)
