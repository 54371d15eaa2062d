# EoMT on BEiT-L, ADE20K semantic 640x640, 4 GPUs x 4 images, 39153 iterations (31 epochs), AMP, from the
# pretrained-only ImageNet-22k checkpoint unilm beit_large_patch16_224_pt22k (its final norm is EoMT's).
# Published: none (EoMT publishes DINOv2/DINOv3 runs only).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='large',
        img_size=640,
        layer_scale_init_value=1e-5,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=4,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=crop_size))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True, backend='pillow'),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5),
         hue_delta=9),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2560, 640), keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
