# CPU demo: fine-tune the tiny BEiT of the MIM demo (configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py: patch 16,
# 96 wide, 4 blocks, 3 heads) from that run's checkpoint on the generated 5-class ImageNet-layout set
# (beit_mm.data.demo.imagenet -> data/imagenet_demo), 64x64 crops, 1 process x 32 images, 10 epochs (70 iterations).
# The checkpoint's shared relative position bias (6x6 grid) is copied into every block and resampled to 4x4 on load.
# Recipe of beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py minus mixup/cutmix/RandAugment/erasing (200 images).
#   python tools/train.py configs/demo/beit-tiny-p16_beit-pre_1xb32-10e_in1k-demo-64px.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px/iter_300.pth
# From scratch (the comparison baseline): add  model.backbone.init_cfg=None
_base_ = ['../_base_/datasets/imagenet_demo.py', '../_base_/default_runtime_cls.py']
mim_checkpoint = 'work_dirs/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px/iter_300.pth'
embed_dims = 96
model = dict(
    type='ImageClassifier',
    data_preprocessor=dict(type='ClsDataPreprocessor', num_classes=5, mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(
        type='beit_mm.BEiT',
        arch=dict(embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=0.1,
        drop_path_rate=0.0,
        out_indices=(-1, ),
        final_norm=False,
        init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')),
    neck=dict(type='beit_mm.MeanPoolNeck', in_channels=embed_dims),
    head=dict(
        type='LinearClsHead',
        num_classes=5,
        in_channels=embed_dims,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02 * 0.001, bias=0.)))
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
base_lr = 2e-3
max_epochs = 10
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.65, bias_decay_mult=0.0, norm_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=1, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=max_epochs)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1, save_best=None))
env_cfg = dict(dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
