# EoMT-L (DINOv2-style ViT-L/16 with 4 registers) for COCO instance segmentation at 640x640, the official recipe.
# Published: 45.2 mask AP (COCO val2017; tue-mps/eomt model_zoo/dinov2.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov2/coco/instance/eomt_large_640.yaml.
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py']
model = dict(
    data_preprocessor=dict(pad_seg=False),
    task='instance',
    num_classes=80,
    num_things_classes=None,
    top_k_instances=100)
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadCocoAnnotations', with_bbox=True, with_mask=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.RandomResize', scale=(640, 640), ratio_range=(0.1, 2.0), keep_ratio=True,
         resize_type='mmdet.Resize'),
    dict(type='mmdet.RandomCrop', crop_size=(640, 640), crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(640, 640), keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'instances')),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoDataset',
        data_root={{_base_.data_root}},
        ann_file='annotations/instances_train2017.json',
        data_prefix=dict(img='train2017/'),
        filter_cfg=dict(filter_empty_gt=True),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoDataset',
        data_root={{_base_.data_root}},
        ann_file='annotations/instances_val2017.json',
        data_prefix=dict(img='val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='beit_mm.DatasetCocoMetric', metric='segm')
test_evaluator = val_evaluator
iters_per_epoch = 7329
max_iters = 12 * iters_per_epoch
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=2 * iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=2 * iters_per_epoch, save_best=None))
