# Mask2Former on ViT-Adapter-B over BEiT-B, Pascal Context 59 480x480, 8 GPUs x 2 images, 40k iterations, from unilm
# beit_base_patch16_224_pt22k_ft22k. Published: 64.0 mIoU single scale, 64.4 multi-scale (czczup/ViT-Adapter
# segmentation/configs/pascal_context/README.md).
# Source: czczup/ViT-Adapter@fd64a51
# segmentation/configs/pascal_context/mask2former_beit_adapter_base_480_40k_pascal_context_59_ss.py.
_base_ = ['../_base_/models/mask2former_beit-adapter-base.py', '../_base_/datasets/pascal_context_59.py']
crop_size = (480, 480)
img_scale = (520, 520)
test_scale = (4096, 520)
num_classes = 59
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=480),
    decode_head=dict(num_classes=num_classes, loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),
    test_cfg=dict(crop_size=crop_size, stride=(320, 320)))
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
