# Demo: Mask2Former panoptic segmentation (mmdet's Mask2Former, Mask2FormerHead, MaskFormerFusionHead) on ADE20K's
# panoptic layout as the official EoMT reads it (beit_mm.ADE20KPanopticDataset: semantic + instance PNGs, mmdet's 150
# ADE20K panoptic classes, 100 things first, then 50 stuff), on the generated demo (python tools/make_demo_data.py
# --layout ade20k-panoptic -> data/ade_panoptic_demo). Everything else is the COCO panoptic demo's
# (configs/demo/mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py: the tiny BEiT from scratch, 300
# iterations, images fitted into 64x64 and padded); the head's and fusion head's class counts are ADE20K's.
_base_ = ['./mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py',
          '../_base_/datasets/ade20k-panoptic_demo-64x64.py']
data_root = 'data/ade_panoptic_demo/'
num_things_classes = 100
num_stuff_classes = 50
model = dict(
    panoptic_head=dict(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes,
                       loss_cls=dict(class_weight=[1.0] * (num_things_classes + num_stuff_classes) + [0.1])),
    panoptic_fusion_head=dict(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes))
train_dataloader = dict(dataset=dict(_delete_=True, **_base_.ade20k_panoptic_demo_train))
val_dataloader = dict(dataset=dict(_delete_=True, **_base_.ade20k_panoptic_demo_val))
test_dataloader = val_dataloader
