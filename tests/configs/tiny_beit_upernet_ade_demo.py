# A tiny BEiT + Feature2Pyramid + UPerNet segmentor on the demo ADE20K data (beit_mm.data.demo.ade20k), for tool tests.
# 4 iterations at batch 2 on 64x64 crops, a checkpoint every 2, validation at the end; everything on CPU in seconds.
# Distributed recipe as written (SyncBN, nccl): single-process and CPU runs are adapted by the tools
# (beit_mm.engine.launch). Set the data root with --cfg-options or edit `data_root`.
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmseg'

data_root = 'data/ade_demo'
crop_size = (64, 64)
norm_cfg = dict(type='SyncBN', requires_grad=True)

model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255,
        size=crop_size),
    backbone=dict(
        type='beit_mm.BEiT',
        arch=dict(embed_dims=32, num_layers=4, num_heads=2, mlp_ratio=2.0),
        img_size=64,
        patch_size=16,
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.0),
    neck=dict(type='Feature2Pyramid', embed_dim=32, rescales=[4, 2, 1, 0.5], norm_cfg=norm_cfg),
    decode_head=dict(
        type='UPerHead',
        in_channels=[32, 32, 32, 32],
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=32,
        dropout_ratio=0.0,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    # slide inference never feeds the fixed-size backbone a crop of another size
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(64, 64)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='ADE20KDataset',
        data_root=data_root,
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        reduce_zero_label=True,
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='ADE20KDataset',
        data_root=data_root,
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        reduce_zero_label=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01))
param_scheduler = [dict(type='PolyLR', eta_min=1e-5, power=1.0, begin=0, end=4, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=4, val_interval=4)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook', interval=1))
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='SegLocalVisualizer', vis_backends=vis_backends)
log_processor = dict(by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0)
