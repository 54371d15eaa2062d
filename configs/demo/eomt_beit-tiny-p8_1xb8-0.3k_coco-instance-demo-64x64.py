# Demo: EoMT instance segmentation (beit_mm.EoMT, task='instance') on the panoptic demo's tiny BEiT, data and schedule,
# with the generated demo's COCO instance files (person, car); mask AP against the dataset's own annotations.
_base_ = ['./eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py',
          '../_base_/datasets/coco-instance_demo-64x64.py']
data_root = 'data/coco_demo/'
thing_classes = ('person', 'car')
model = dict(task='instance', num_classes=len(thing_classes), num_things_classes=None, top_k_instances=100)
train_dataloader = dict(dataset=dict(_delete_=True, **_base_.coco_instance_demo_train))
val_dataloader = dict(dataset=dict(_delete_=True, **_base_.coco_instance_demo_val))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, **_base_.coco_instance_demo_evaluator)
test_evaluator = val_evaluator
