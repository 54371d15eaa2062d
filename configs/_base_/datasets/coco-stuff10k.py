# COCO-Stuff-10k (mmseg's COCOStuffDataset, the layout of mmseg's tools/dataset_converters/coco_stuff10k.py:
# images/{train2014,test2014}/COCO_{train,val}2014_<12-digit id>.jpg, annotations/{train2014,test2014}/<same
# stem>_labelTrainIds.png with 0 = unlabeled and the 171 classes as 1..171), 512x512 crops (test scale 2048x512):
# mmseg 1.2.2 configs/_base_/datasets/coco-stuff10k.py with beit_mm's loader settings. reduce_zero_label maps
# 0 -> 255 (ignored) and k -> k - 1; 9k training and 1k test images (the test split is the validation set).
# Demo data in this layout: python tools/make_demo_data.py --layout coco-stuff10k (data/coco_stuff10k_demo).
dataset_type = 'COCOStuffDataset'
data_root = 'data/coco_stuff10k'
crop_size = (512, 512)
test_scale = (2048, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='TestTimeAug',
         transforms=[[dict(type='Resize', scale_factor=r, keep_ratio=True) for r in img_ratios],
                     [dict(type='RandomFlip', prob=0., direction='horizontal'),
                      dict(type='RandomFlip', prob=1., direction='horizontal')],
                     [dict(type='LoadAnnotations', reduce_zero_label=True)], [dict(type='PackSegInputs')]]),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    pin_memory=True,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        reduce_zero_label=True,
        data_prefix=dict(img_path='images/train2014', seg_map_path='annotations/train2014'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        reduce_zero_label=True,
        data_prefix=dict(img_path='images/test2014', seg_map_path='annotations/test2014'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
