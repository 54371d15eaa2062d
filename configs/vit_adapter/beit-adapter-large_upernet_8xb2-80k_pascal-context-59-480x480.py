# ViT-Adapter-L on BEiT-L + UPerNet, Pascal Context 59 480x480, 8 GPUs x 2 images, 80k iterations: the ADE20K recipe.
# Published: 67.0 mIoU single scale, 67.5 multi-scale (czczup/ViT-Adapter
# segmentation/configs/pascal_context/README.md).
# Source: czczup/ViT-Adapter@fd64a51
# segmentation/configs/pascal_context/upernet_beit_adapter_large_480_80k_pascal_context_59_ss.py.
# The released segmentor converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
_base_ = ['../_base_/models/upernet_beit-adapter-large.py', '../_base_/datasets/pascal_context_59.py']
crop_size = (480, 480)
img_scale = (520, 520)
test_scale = (4096, 520)
num_classes = 59
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=480),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes),
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
max_iters = 80000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=8000)
