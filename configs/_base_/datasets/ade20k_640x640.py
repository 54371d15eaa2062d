# ADE20K (ADEChallengeData2016 layout: images/{training,validation}/*.jpg, annotations/{training,validation}/*.png
# with 0 = "other"), 640x640 crops. reduce_zero_label maps 0 -> 255 (ignored) and classes 1..150 -> 0..149.
dataset_type = 'ADE20KDataset'
data_root = 'data/ade/ADEChallengeData2016'
crop_size = (640, 640)
test_scale = (2560, 640)
pack_meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor', 'flip',
                  'flip_direction', 'reduce_zero_label', 'photometric_distortion')
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=test_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='beit_mm.HistogramRandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='beit_mm.SamplePhotoMetricDistortion'),
    dict(type='PackSegInputs', meta_keys=pack_meta_keys),
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
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
