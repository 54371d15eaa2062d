# The generated classification demo set (beit_mm.data.demo.imagenet.make_demo_imagenet -> data/imagenet_demo):
# ImageNet's folder layout with 5 wnid-named classes, 64x64 images. mmpretrain's ImageNet dataset insists on 1000
# class folders, so the demo reads the same layout with CustomDataset (classes = sorted folder names, as ImageNet).
dataset_type = 'CustomDataset'
data_root = 'data/imagenet_demo'
data_preprocessor = dict(
    type='ClsDataPreprocessor',
    num_classes=5,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.35, 1.0), backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=64, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=64),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=32,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, data_prefix='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=32,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, data_prefix='val', pipeline=test_pipeline))
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
