# Cityscapes (mmseg's CityscapesDataset, the layout of the official download after mmseg's
# tools/dataset_converters/cityscapes.py: leftImg8bit/{train,val}/<city>/<city>_<seq>_<frame>_leftImg8bit.png,
# gtFine/{train,val}/<city>/<same stem>_gtFine_labelTrainIds.png with the 19 train ids 0..18 and 255 ignored; the
# other gtFine files are not read), 512x1024 crops (test scale 2048x1024): mmseg 1.2.2
# configs/_base_/datasets/cityscapes.py with beit_mm's loader settings. No reduce_zero_label: 0 is "road".
# Demo data in this layout: python tools/make_demo_data.py --layout cityscapes (data/cityscapes_demo).
dataset_type = 'CityscapesDataset'
data_root = 'data/cityscapes/'
crop_size = (512, 1024)
test_scale = (2048, 1024)
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
        data_prefix=dict(img_path='leftImg8bit/train', seg_map_path='gtFine/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='leftImg8bit/val', seg_map_path='gtFine/val'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
