# EoMT on BEiT v2 BEiT-B, ADE20K semantic segmentation 512x512, 4 GPUs x 4 images (16), 39153 iterations (31 epochs),
# mixed precision, from the BEiT v2 pretrained-only ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k (1600
# epochs of VQ-KD MIM), as configs/beit2/beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py: the shared relative
# position bias is copied into every block and resampled from 14x14 to 32x32 on load; the file's final norm is the norm
# EoMT predicts from (the cls-token pretraining blocks are dropped on conversion).
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones; no BEiT v2 + EoMT number was found.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
