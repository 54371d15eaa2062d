# EoMT on BEiT v2 BEiT-L for COCO panoptic segmentation at 640x640: the BEiT-L COCO panoptic config
# (eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py: the official EoMT-L COCO panoptic 640 recipe of
# github.com/tue-mps/eomt @ 7bd19dd with a BEiT-L backbone, every value and source in its header and the official
# config's) from the BEiT v2 pretrained-only ImageNet-1k checkpoint unilm beitv2_large_patch16_224_pt1k (1600 epochs
# of VQ-KD MIM), as configs/beit2/beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py starts: the shared relative
# position bias is copied into every block and resampled from 14x14 to 40x40 on load; the file's final norm is the norm
# EoMT predicts from (the cls-token pretraining blocks are dropped on conversion). Layer scale init 1e-5 as BEiT v2-L
# pretraining (configs/beit2/beitv2_beit-large-p16_8xb256-amp-coslr-1600e_in1k.py; the checkpoint's gammas replace it).
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones; no BEiT v2 + EoMT number was found.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k.pth \
#       checkpoints/beitv2-large_pt1k.pth
_base_ = ['./eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py']
pretrained = 'checkpoints/beitv2-large_pt1k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
