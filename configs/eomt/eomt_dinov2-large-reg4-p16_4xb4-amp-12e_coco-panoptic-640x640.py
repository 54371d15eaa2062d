# EoMT-L (DINOv2-style ViT-L/16 with 4 registers) for COCO panoptic segmentation at 640x640, the official recipe.
# Published: 56.0 PQ (COCO panoptic val2017; tue-mps/eomt model_zoo/dinov2.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov2/coco/panoptic/eomt_large_640.yaml.
#   python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 640 --patch-size 16 \
#       vit_large_patch14_reg4_dinov2.lvd142m.safetensors checkpoints/dinov2-large-reg4_p16-640.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py']
data_root = 'data/coco/'
img_size = 640
pretrained = 'checkpoints/dinov2-large-reg4_p16-640.pth'
model = dict(
    data_preprocessor=dict(
        _delete_=True,
        type='mmdet.DetDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_size_divisor=img_size,
        pad_mask=True,
        mask_pad_value=0,
        pad_seg=True,
        seg_pad_value=255),
    backbone=dict(img_size=img_size, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    task='panoptic',
    num_classes=133,
    num_things_classes=80,
    num_queries=200,
    num_blocks=4,
    mask_thresh=0.8,
    overlap_thresh=0.8,
    mask_annealing=dict(start_steps=[14782, 29564, 44346, 59128], end_steps=[29564, 44346, 59128, 73910]),
    test_cfg=dict(_delete_=True, mode='whole'))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.RandomResize', scale=(img_size, img_size), ratio_range=(0.1, 2.0), keep_ratio=True,
         resize_type='mmdet.Resize'),
    dict(type='mmdet.RandomCrop', crop_size=(img_size, img_size), crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(img_size, img_size), keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(
    batch_size=4,
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_train2017.json',
        data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),
        filter_cfg=dict(filter_empty_gt=False),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_val2017.json',
        data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='beit_mm.PanopticQualityMetric', classwise=True)
test_evaluator = val_evaluator
iters_per_epoch = 7391
max_iters = 12 * iters_per_epoch
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None),
                     visualization=dict(type='mmdet.DetVisualizationHook'))
custom_hooks = [
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
visualizer = dict(
    _delete_=True, type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')],
    name='visualizer')
tta_model = None
