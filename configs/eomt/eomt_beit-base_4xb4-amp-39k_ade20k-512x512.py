# EoMT (Kerssies et al. CVPR 2025) on BEiT-B, ADE20K semantic 512x512, 4 GPUs x 4 images, 39153 iterations (31 epochs),
# AMP, from the pretrained-only ImageNet-22k checkpoint unilm beit_base_patch16_224_pt22k.
# Published: none (EoMT publishes DINOv2/DINOv3 runs only). Source: tue-mps/eomt@7bd19dd
# configs/dinov2/ade20k/semantic/eomt_large_512.yaml with a BEiT-B backbone.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth \
#       checkpoints/beit-base_pt22k.pth
_base_ = [
    '../_base_/models/eomt_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beit-base_pt22k.pth'
model = dict(
    data_preprocessor=dict(
        type='beit_mm.PhotoMetricSegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255,
        size=crop_size,
        test_cfg=None),
    backbone=dict(
        arch='base',
        img_size=512,
        patch_size=16,
        use_shared_rel_pos_bias=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=3,
    mask_annealing=dict(start_steps=[6520, 16300, 26080], end_steps=[13040, 22820, 32600], poly_power=0.9),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=crop_size))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True, backend='pillow'),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5),
         hue_delta=9),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 1e-4
max_iters = 39153
iters_per_epoch = 1263
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8, llrd_l2_enabled=True))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None))
custom_hooks = [
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
randomness = dict(seed=0)
env_cfg = dict(cudnn_benchmark=False)
compile = dict(scope='model', devices=['cuda'])
