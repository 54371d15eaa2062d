# The built-in demo data (python tools/make_demo_data.py -> data/ade_demo): ADE20K's folder layout and label coding
# (0 = other, ADE20K class ids 1..150, reduce_zero_label), 128x128 images.
_base_ = ['./ade20k_640x640.py']
data_root = 'data/ade_demo'
crop_size = (128, 128)
test_scale = (512, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=8, num_workers=2, dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=2, dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
