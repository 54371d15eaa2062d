# Demo: a tiny CvT (stage widths 32/64/128, depths 1/1/2) + UPerNet trained FROM SCRATCH (no pretrained checkpoint, on
# purpose) on the generated ADE20K-layout demo data (python tools/make_demo_data.py -> data/ade_demo), 1 process x 8
# images, 300 iterations, 128x128; tools/run_demo.sh prints the last checkpoint's mIoU on the demo validation set:
#   CONFIG=configs/demo/cvt-13-tiny_upernet_1xb8-0.3k_ade20k-demo-128x128.py bash tools/run_demo.sh
_base_ = [
    '../_base_/models/upernet_cvt.py', '../_base_/datasets/ade20k_demo_128x128.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (128, 128)
norm_cfg = dict(type='BN', requires_grad=True)
dims = [32, 64, 128]
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch=dict(_delete_=True, embed_dims=dims, depths=[1, 1, 2], num_heads=[1, 2, 4]),
                  drop_path_rate=0.0),
    decode_head=dict(in_channels=dims + dims[-1:], channels=64, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=dims[-1], channels=32, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
base_lr = 1e-3
max_iters = 300
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9, no_decay_names=('cls_token', ), bias_decay_mult=0.0,
                       norm_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=100, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=300)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=300, max_keep_ckpts=2, save_best=None))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
