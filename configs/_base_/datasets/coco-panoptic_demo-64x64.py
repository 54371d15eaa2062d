# The generated COCO-layout demo (python tools/make_demo_data.py --layout coco -> data/coco_demo: things person, car;
# stuff road, sky, grass) for panoptic segmentation at 64x64: images resized to fit 64x64 keeping their aspect (the
# model's data preprocessor pads them to it); mmdet's CocoPanopticDataset with beit_mm.LoadPanopticAnnotations (no
# panopticapi) and PQ/SQ/RQ (all, things, stuff) from beit_mm.PanopticQualityMetric (panopticapi's rule). Used by the
# EoMT and Mask2Former panoptic demos (configs/demo/*_coco-panoptic-demo-64x64.py); their instance demos replace the
# dataset.
data_root = 'data/coco_demo/'
img_size = 64
thing_classes = ('person', 'car')
stuff_classes = ('road', 'sky-other-merged', 'grass-merged')
metainfo = dict(classes=thing_classes + stuff_classes, thing_classes=thing_classes, stuff_classes=stuff_classes)
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.Resize', scale=(img_size, img_size), keep_ratio=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(img_size, img_size), keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/panoptic_train2017.json',
        data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),
        filter_cfg=dict(filter_empty_gt=False),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/panoptic_val2017.json',
        data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='beit_mm.PanopticQualityMetric', classwise=True)
test_evaluator = val_evaluator
