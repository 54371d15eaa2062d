# Demo: Mask2Former panoptic segmentation (mmdet 3.3.0) on ViT-Adapter: the plain-BEiT panoptic demo's head, loss, data
# and schedule with the tiny ViT-Adapter of the ADE20K ViT-Adapter demos in place of BEiT + Feature2Pyramid, trained
# from scratch, 1 process x 8 images, images fitted into 64x64 and padded.
_base_ = [
    './mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py', '../_base_/models/beit-adapter-tiny_demo.py'
]
model = dict(backbone=dict(_delete_=True, **_base_.beit_adapter_tiny), neck=None)
