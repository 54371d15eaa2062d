# Demo: EoMT instance segmentation (beit_mm.EoMT, task='instance') on the panoptic demo's tiny BEiT, data and schedule
# (configs/demo/eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py), with COCO's instance files of the generated
# demo (annotations/instances_{train,val}2017.json: person, car) read by mmdet's CocoDataset; mask AP from mmdet's
# CocoMetric (pycocotools). The official post-processing keeps the top 100 query x class scores
# (training/mask_classification_instance.py:44 @ 7bd19dd).
_base_ = ['./eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py']
data_root = 'data/coco_demo/'
thing_classes = ('person', 'car')
metainfo = dict(classes=thing_classes)
model = dict(task='instance', num_classes=len(thing_classes), num_things_classes=None, top_k_instances=100)
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
    dict(type='mmdet.PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoDataset',
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_train2017.json',
        data_prefix=dict(img='train2017/'),
        filter_cfg=dict(filter_empty_gt=True),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoDataset',
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_val2017.json',
        data_prefix=dict(img='val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(
    _delete_=True, type='mmdet.CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json', metric='segm')
test_evaluator = val_evaluator
