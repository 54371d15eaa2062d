# EoMT on BEiT v2 BEiT-L, COCO panoptic 640x640: eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py from the
# pretrained-only ImageNet-1k checkpoint unilm beitv2_large_patch16_224_pt1k.
# Published: none (EoMT publishes DINOv2/DINOv3 runs only).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k.pth \
#       checkpoints/beitv2-large_pt1k.pth
_base_ = ['./eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py']
pretrained = 'checkpoints/beitv2-large_pt1k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
