# EoMT on BEiT-L for COCO instance segmentation at 640x640: the official EoMT-L COCO instance 640 recipe
# (eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py, whose header cites every value in
# github.com/tue-mps/eomt @ 7bd19dd) with its DINOv2-L backbone swapped for BEiT-L, from the self-supervised (MIM,
# pretrained-only) ImageNet-22k checkpoint unilm beit_large_patch16_224_pt22k, as the BEiT-L COCO panoptic config
# (eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py, whose header describes the backbone).
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones (tue-mps/eomt model_zoo/dinov2.md, dinov3.md;
# COCO instance EoMT-L 640, DINOv2: 45.2 mask AP); no BEiT + EoMT number was found.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py', '../_base_/models/eomt_beit-large.py']
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    backbone=dict(_delete_=True,
                  **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
