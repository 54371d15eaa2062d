# Demo of "Your own dataset" (docs/data.md): the tiny BEiT (patch 8) + UPerNet demo
# (beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py: same model, schedule, seed) trained from scratch on a set in the
# custom layout of beit_mm.CustomSegDataset, here the generated three-class one
# (python tools/make_demo_data.py --layout custom -> data/custom_demo: sky, grass, car; 128 px files resized to 64 as
# the ADE20K demo's). Only the data part differs: the custom layout (configs/_base_/datasets/custom.py's dataset and
# prefixes) at the demo's 64x64 size, reduce_zero_label=False, and the heads' num_classes = the lines of classes.txt.
# Another set in this layout: --cfg-options {train,val,test}_dataloader.dataset.data_root=<root> and the heads'
# num_classes (the dataset check before training names both when they disagree).
_base_ = ['./beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py']
num_classes = 3
dataset_type = 'beit_mm.CustomSegDataset'
data_root = 'data/custom_demo'
crop_size = (64, 64)
test_scale = (256, 64)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=False),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=False),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/train', seg_map_path='masks/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/val', seg_map_path='masks/val'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(decode_head=dict(num_classes=num_classes), auxiliary_head=dict(num_classes=num_classes))
