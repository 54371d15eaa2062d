# ViT-Adapter-L on BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from unilm
# beit_large_patch16_224_pt22k_ft22k (the adapter's own weights start at their init).
# Published: 58.0 mIoU single scale, 58.4 multi-scale (czczup/ViT-Adapter segmentation/configs/ade20k/README.md).
# Source: czczup/ViT-Adapter@fd64a51 segmentation/configs/ade20k/upernet_beit_adapter_large_640_160k_ade20k_ss.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# The released segmentor converts to this model with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
_base_ = ['../_base_/models/upernet_beit-adapter-large.py', '../_base_/datasets/ade20k_640x640.py']
crop_size = (640, 640)
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
