# Demo: a tiny CvT (stage widths 32/64/128, depths 1/1/2) trained FROM SCRATCH on the generated 5-class ImageNet-layout
# demo set (beit_mm.data.demo.imagenet -> data/imagenet_demo), 1 process x 32 images, 30 epochs, 64x64: the CvT
# ImageNet recipe minus mixup/cutmix/RandAugment/erasing (200 training images). A few minutes on 2 CPU cores:
#   bash tools/run_demo_cls.sh
_base_ = [
    '../_base_/models/cvt-13_in1k.py', '../_base_/datasets/imagenet_demo.py',
    '../_base_/schedules/imagenet_bs2048_adamw_cvt.py', '../_base_/default_runtime_cls.py'
]
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=[32, 64, 128], depths=[1, 1, 2], num_heads=[1, 2, 4]), drop_path_rate=0.0),
    head=dict(num_classes=5, in_channels=128),
    train_cfg=dict(_delete_=True))
base_lr = 2e-3
max_epochs = 30
optim_wrapper = dict(optimizer=dict(lr=base_lr))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, begin=0, end=2, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=2, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=5)
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=5, max_keep_ckpts=2, save_best=None))
env_cfg = dict(dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
