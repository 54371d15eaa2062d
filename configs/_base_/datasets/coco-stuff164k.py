# COCO-Stuff-164k (mmseg's COCOStuffDataset, the layout of mmseg's tools/dataset_converters/coco_stuff164k.py:
# images/{train2017,val2017}/<12-digit id>.jpg, annotations/{train2017,val2017}/<id>_labelTrainIds.png with the 171
# classes as 0..170 and 255 unlabeled), 512x512 crops (test scale 2048x512): mmseg 1.2.2
# configs/_base_/datasets/coco-stuff164k.py with beit_mm's loader settings. No reduce_zero_label: 0 is "person".
# Demo data in this layout: python tools/make_demo_data.py --layout coco-stuff164k (data/coco_stuff164k_demo).
dataset_type = 'COCOStuffDataset'
data_root = 'data/coco_stuff164k'
crop_size = (512, 512)
test_scale = (2048, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='TestTimeAug',
         transforms=[[dict(type='Resize', scale_factor=r, keep_ratio=True) for r in img_ratios],
                     [dict(type='RandomFlip', prob=0., direction='horizontal'),
                      dict(type='RandomFlip', prob=1., direction='horizontal')],
                     [dict(type='LoadAnnotations')], [dict(type='PackSegInputs')]]),
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
        data_prefix=dict(img_path='images/train2017', seg_map_path='annotations/train2017'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/val2017', seg_map_path='annotations/val2017'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
