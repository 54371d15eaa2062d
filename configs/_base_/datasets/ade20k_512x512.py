# ADE20K at 512x512 crops (test scale 2048x512); everything else as the 640 config.
_base_ = ['./ade20k_640x640.py']
crop_size = (512, 512)
test_scale = (2048, 512)
# The exact pipeline: mmseg's transforms, PhotoMetricDistortion on the worker.
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
# The pipeline used: the same draws in the same order, so the same crops, flips and distortion parameters for a
# seed; the category check of the crop on a histogram; the distortion applied by beit_mm.PhotoMetricSegDataPreProcessor
# on the device (beit_mm/data/seg_transforms.py; docs/performance.md#data-loading: what is exact, the cost).
# Back to the exact pipeline: train_dataloader = dict(dataset=dict(pipeline=train_pipeline_exact)).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='beit_mm.HistogramRandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='beit_mm.SamplePhotoMetricDistortion'),
    dict(type='PackSegInputs', meta_keys=_base_.pack_meta_keys),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
