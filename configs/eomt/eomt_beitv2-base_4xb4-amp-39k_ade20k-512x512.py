# EoMT on BEiT v2 BEiT-B, ADE20K semantic 512x512, 4 GPUs x 4 images, 39153 iterations (31 epochs), AMP, from the
# pretrained-only ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k.
# Published: none (EoMT publishes DINOv2/DINOv3 runs only).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
