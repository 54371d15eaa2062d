# Demo: Mask2Former instance segmentation (mmdet 3.3.0, no stuff classes, instance_on, as mmdet derives its instance
# config from the panoptic one) on the panoptic demo's tiny BEiT, data and schedule, with the generated demo's COCO
# instance files (person, car); mask AP against the dataset's own annotations.
_base_ = ['./mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py',
          '../_base_/datasets/coco-instance_demo-64x64.py']
data_root = 'data/coco_demo/'
thing_classes = ('person', 'car')
num_things_classes = len(thing_classes)
model = dict(
    data_preprocessor=dict(pad_seg=False),
    panoptic_head=dict(num_things_classes=num_things_classes, num_stuff_classes=0,
                       loss_cls=dict(class_weight=[1.0] * num_things_classes + [0.1])),
    panoptic_fusion_head=dict(num_things_classes=num_things_classes, num_stuff_classes=0),
    test_cfg=dict(panoptic_on=False, instance_on=True))
train_dataloader = dict(dataset=dict(_delete_=True, **_base_.coco_instance_demo_train))
val_dataloader = dict(dataset=dict(_delete_=True, **_base_.coco_instance_demo_val))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, **_base_.coco_instance_demo_evaluator)
test_evaluator = val_evaluator
