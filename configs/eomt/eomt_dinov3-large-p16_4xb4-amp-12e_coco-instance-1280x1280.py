# EoMT-L on DINOv3 ViT-L/16 for COCO instance 1280x1280: eomt_dinov3-large-p16_4xb4-amp-12e_coco-instance-640x640.py at
# 1280 (the model zoo's input size). Published: 49.9 mask AP (COCO val2017; tue-mps/eomt model_zoo/dinov3.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov3/coco/instance/eomt_large_1280.yaml.
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
_base_ = ['./eomt_dinov3-large-p16_4xb4-amp-12e_coco-instance-640x640.py']
img_size = 1280
model = dict(data_preprocessor=dict(pad_size_divisor=img_size), backbone=dict(img_size=img_size))
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
