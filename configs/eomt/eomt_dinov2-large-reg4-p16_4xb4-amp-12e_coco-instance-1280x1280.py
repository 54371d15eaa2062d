# EoMT-L for COCO instance segmentation at 1280x1280: eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py
# at 1280. Published: 48.8 mask AP (COCO val2017; tue-mps/eomt model_zoo/dinov2.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov2/coco/instance/eomt_large_1280.yaml.
# Start: checkpoints/dinov2-large-reg4_p16-1280.pth, as the panoptic 1280 config.
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py']
img_size = 1280
pretrained = 'checkpoints/dinov2-large-reg4_p16-1280.pth'
model = dict(
    data_preprocessor=dict(pad_size_divisor=img_size),
    backbone=dict(img_size=img_size, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadCocoAnnotations', with_bbox=True, with_mask=True),
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
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'instances')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
