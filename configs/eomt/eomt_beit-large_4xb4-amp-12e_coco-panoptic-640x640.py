# EoMT on BEiT-L, COCO panoptic 640x640: eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py (the official
# recipe, tue-mps/eomt@7bd19dd) with BEiT-L from the pretrained-only unilm beit_large_patch16_224_pt22k.
# Published: none (EoMT publishes DINOv2/DINOv3 runs only; DINOv2 EoMT-L 640: 56.0 PQ).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/models/eomt_beit-large.py']
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    backbone=dict(_delete_=True,
                  **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
