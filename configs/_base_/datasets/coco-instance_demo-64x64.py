# The generated COCO-layout demo's instance files (python tools/make_demo_data.py --layout coco -> data/coco_demo:
# annotations/instances_{train,val}2017.json, things person and car) at 64x64 for mmdet's CocoDataset, and mask AP
# (pycocotools) against the validation dataset's own annotations (beit_mm.DatasetCocoMetric: it follows the dataset's
# data_root). As variables: the EoMT and Mask2Former instance demos inherit their panoptic demos
# (model, schedule, dataloaders; MMEngine refuses a key in two bases) and replace the datasets and the metric,
# `dataset=dict(_delete_=True, **_base_.coco_instance_demo_train)`.
coco_instance_demo_root = 'data/coco_demo/'
coco_instance_demo_metainfo = dict(classes=('person', 'car'))
coco_instance_demo_train = dict(
    type='mmdet.CocoDataset',
    data_root=coco_instance_demo_root,
    metainfo=coco_instance_demo_metainfo,
    ann_file='annotations/instances_train2017.json',
    data_prefix=dict(img='train2017/'),
    filter_cfg=dict(filter_empty_gt=True),
    pipeline=[
        dict(type='mmdet.LoadImageFromFile'),
        dict(type='beit_mm.LoadCocoAnnotations', with_bbox=True, with_mask=True),
        dict(type='mmdet.RandomFlip', prob=0.5),
        dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
        dict(type='mmdet.PackDetInputs'),
    ])
coco_instance_demo_val = dict(
    type='mmdet.CocoDataset',
    data_root=coco_instance_demo_root,
    metainfo=coco_instance_demo_metainfo,
    ann_file='annotations/instances_val2017.json',
    data_prefix=dict(img='val2017/'),
    test_mode=True,
    pipeline=[
        dict(type='mmdet.LoadImageFromFile'),
        dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
        dict(type='mmdet.PackDetInputs',
             meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'instances')),
    ])
coco_instance_demo_evaluator = dict(type='beit_mm.DatasetCocoMetric', metric='segm')
