# Mask2Former panoptic (mmdet 3.3.0) on ViT-Adapter-L over BEiT v2-L, COCO panoptic, 16 GPUs x 1 image, 265.5k
# iterations, from unilm beitv2_large_patch16_224_pt1k_ft21k. Published: 58.4 PQ, 48.9 mask AP on COCO val2017
# (czczup/ViT-Adapter detection/configs/mask2former/README.md).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
_base_ = ['../_base_/models/mask2former_beit_coco-panoptic.py', '../_base_/default_runtime.py']
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'
data_root = 'data/coco/'
num_things_classes = 80
num_stuff_classes = 53
width = 1024
model = dict(
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_size_divisor=32),
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',
        img_size=224,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.4,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=16,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    panoptic_head=dict(in_channels=[width] * 4))
backend_args = None
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile', to_float32=True),
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(
        type='mmdet.RandomChoice',
        transforms=[
            [
                dict(type='mmdet.RandomChoiceResize',
                     scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                             (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],
                     keep_ratio=True,
                     resize_type='mmdet.Resize')
            ],
            [
                dict(type='mmdet.RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)],
                     keep_ratio=True, resize_type='mmdet.Resize'),
                dict(type='mmdet.RandomCrop', crop_type='absolute_range', crop_size=(384, 600),
                     allow_negative_crop=True),
                dict(type='mmdet.RandomChoiceResize',
                     scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                             (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],
                     keep_ratio=True,
                     resize_type='mmdet.Resize')
            ]
        ]),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(1333, 800), keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_train2017.json',
        data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),
        filter_cfg=dict(filter_empty_gt=True),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_val2017.json',
        data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = [
    dict(type='beit_mm.PanopticQualityMetric', classwise=True),
    dict(type='mmdet.CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json',
         metric=['bbox', 'segm']),
]
test_evaluator = val_evaluator
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.90),
    clip_grad=dict(max_norm=0.01, norm_type=2))
max_iters = 265500
param_scheduler = [
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters, milestones=[191750, 236000], gamma=0.1)
]
interval = 5000
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=interval,
                 dynamic_intervals=[(max_iters // interval * interval + 1, max_iters)])
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=interval, save_last=True,
                    max_keep_ckpts=3),
    visualization=dict(type='mmdet.DetVisualizationHook'))
custom_hooks = [
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='mmdet.EMAHook', ema_type='mmdet.ExpMomentumEMA', momentum=0.0001, update_buffers=True,
         priority=49),
]
auto_scale_lr = dict(enable=False, base_batch_size=16)
visualizer = dict(_delete_=True, type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
tta_model = None
