# EoMT on BEiT-L for COCO instance segmentation at 640x640: the official EoMT-L COCO instance 640 recipe
# (eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py, whose header cites every value in
# github.com/tue-mps/eomt @ 7bd19dd) with its DINOv2-L backbone swapped for BEiT-L, from the self-supervised (MIM,
# pretrained-only) ImageNet-22k checkpoint unilm beit_large_patch16_224_pt22k, as the BEiT-L COCO panoptic config
# (eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py, whose header describes the backbone).
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones (tue-mps/eomt model_zoo/dinov2.md, dinov3.md;
# COCO instance EoMT-L 640, DINOv2: 45.2 mask AP); no BEiT + EoMT number was found.
#
# Inherited unchanged from the official COCO instance 640 config (tue-mps/eomt @ 7bd19dd, path:line as there): 12 epochs
# of 7329 steps (configs/dinov2/coco/instance/eomt_large_640.yaml:2), validation every 2 epochs (:3), 200 queries
# (:19), L2 = 4 (models/eomt.py:24; BEiT-L has 24 blocks as the official ViT-L), 80 classes (datasets/coco_instance.py:
# 109), mask annealing starts 14782, 29564, 44346, 59128, ends 29564, 44346, 59128, 73910 (eomt_large_640.yaml:14-15),
# the top 100 query x class scores per image (training/mask_classification_instance.py:44), optimizer, llrd, lr
# schedule, loss, post-processing thresholds (mask_classification_instance.py:28-43), clip, batch, precision, seed,
# data and test as the official panoptic 640 config; ImageNet mean/std (official models/vit.py:41-44), as the
# semantic BEiT EoMT configs; mask AP from mmdet's CocoMetric (pycocotools).
#
# The backbone: BEiT-L as the BEiT-L COCO panoptic config (patch 16, img_size 640, a relative position bias per
# block, layer scale, no drop path, final norm). Differences from the official run: the backbone; the rest as the
# official config's header.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py', '../_base_/models/eomt_beit-large.py']
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    backbone=dict(_delete_=True,  # none of the DINOv2 ViT's position embedding, registers or flags
                  **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
