# BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 1 image with 2-step gradient accumulation, 320k iterations = 160k updates,
# mixed precision, from the ImageNet-22k fine-tuned checkpoint unilm beit_large_patch16_224_pt22k_ft22k.
# Published: 56.7 mIoU (unilm beit/README.md), 56.33 (mmseg 0.x configs/beit/README.md).
# Source: microsoft/unilm@768a3c87
# beit/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_640_slide_160k_ade20k_pt2ft.py.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           test_cfg=None),
    backbone=dict(
        arch='large',
        img_size=640,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.2,
        out_indices=(7, 11, 15, 23),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(embed_dim=1024),
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], channels=1024),
    auxiliary_head=dict(in_channels=1024),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))
base_lr = 2e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    accumulative_counts=2,
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
max_iters = 320000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=3000 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=32000)
default_hooks = dict(checkpoint=dict(interval=32000))
train_dataloader = dict(batch_size=1)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
randomness = dict(seed=0)
compile = dict(scope='model', devices=['cuda'])
