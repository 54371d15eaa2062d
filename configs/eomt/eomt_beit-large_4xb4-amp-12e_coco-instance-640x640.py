# EoMT on BEiT-L, COCO instance 640x640: eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py (the official
# recipe, tue-mps/eomt@7bd19dd) with the backbone of eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py.
# Published: none (EoMT publishes DINOv2/DINOv3 runs only; DINOv2 EoMT-L 640: 45.2 mask AP).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py', '../_base_/models/eomt_beit-large.py']
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    backbone=dict(_delete_=True,
                  **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
