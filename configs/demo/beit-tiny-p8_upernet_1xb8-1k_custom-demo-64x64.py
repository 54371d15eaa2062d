# Demo of "Your own dataset" (docs/data.md): the tiny BEiT + UPerNet demo trained from scratch on the generated
# three-class set in beit_mm.CustomSegDataset's layout (python tools/make_demo_data.py --layout custom). Another set in
# this layout: --cfg-options {train,val,test}_dataloader.dataset.data_root=<root> and the heads' num_classes.
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
