# Demo: Mask2Former panoptic segmentation (mmdet 3.3.0's Mask2Former, Mask2FormerHead and MaskFormerFusionHead) on
# ViT-Adapter: the plain-BEiT panoptic demo's head, loss, data, optimizer and 300-iteration schedule
# (configs/demo/mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py: generated COCO-layout demo from
# python tools/make_demo_data.py --layout coco -> data/coco_demo, things person, car; stuff road, sky, grass; PQ/SQ/RQ
# from beit_mm.PanopticQualityMetric) with the tiny ViT-Adapter of the ADE20K ViT-Adapter demos
# (configs/_base_/models/beit-adapter-tiny_demo.py, as configs/demo/mask2former_beit-adapter-tiny_1xb8-1k_ade20k-demo-
# 64x64.py) in place of the BEiT + Feature2Pyramid: its 4 levels of 96 channels at strides 4/8/16/32 feed the head's
# in_channels [96] * 4 directly (neck None). Trained FROM SCRATCH, 1 process x 8 images, images resized to fit 64x64
# and padded to 64x64 (a multiple of 32, as the adapter needs).
_base_ = [
    './mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py', '../_base_/models/beit-adapter-tiny_demo.py'
]
model = dict(backbone=dict(_delete_=True, **_base_.beit_adapter_tiny), neck=None)
