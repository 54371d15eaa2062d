# Your own semantic-segmentation set (beit_mm.CustomSegDataset, docs/data.md "Your own dataset"): data_root holds
# classes.txt (one name per line, line i = mask value i), an optional palette.txt, images/{train,val}/*.jpg|png and
# masks/{train,val}/<same stem>.png with class indices 0..N-1 and 255 ignored. The ADE20K 512x512 recipe's pipelines
# (ade20k_512x512.py) with reduce_zero_label=False: every mask value below N is a class, there is no 0 = "other".
# Swap it in for '../_base_/datasets/ade20k_512x512.py' (or ade20k_640x640.py) in a config's _base_ and set the
# heads' num_classes to the number of lines of classes.txt (the dataset check before training names the values).
_base_ = ['./ade20k_512x512.py']
dataset_type = 'beit_mm.CustomSegDataset'
data_root = 'data/custom'
crop_size = (512, 512)
test_scale = (2048, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=False),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=False),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/train', seg_map_path='masks/train'),
        reduce_zero_label=False,
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/val', seg_map_path='masks/val'),
        reduce_zero_label=False,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
