# Mask2Former on BEiT-B (no adapter: mmseg's Mask2FormerHead over beit_mm's pyramid neck), ADE20K 640x640, 8 GPUs x 2
# images, 160k iterations, from unilm beit_base_patch16_224_pt22k_ft22k. Published: none for this setup.
# Source: czczup/ViT-Adapter@fd64a51 segmentation/configs/ade20k/mask2former_beit_adapter_large_640_160k_ade20k_ss.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
_base_ = [
    '../_base_/models/mask2former_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
crop_size = (640, 640)
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        test_cfg=None),
    backbone=dict(
        img_size=640,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(2048, 640), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 640), keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 3e-5
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
