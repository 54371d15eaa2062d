# EoMT on BEiT v2 BEiT-B, ADE20K semantic segmentation 512x512, 4 GPUs x 4 images (16), 39153 iterations (31 epochs),
# mixed precision, from the BEiT v2 pretrained-only ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k (1600
# epochs of VQ-KD MIM), as configs/beit2/beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py: the shared relative
# position bias is copied into every block and resampled from 14x14 to 32x32 on load; the file's final norm is the norm
# EoMT predicts from (the cls-token pretraining blocks are dropped on conversion).
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones; no BEiT v2 + EoMT number was found.
#
# Every other value, with its source in github.com/tue-mps/eomt @ 7bd19dd and what differs from the official runs, is
# the BEiT-B config's (eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py, header): 100 queries, L2 = 3 (the official
# ViT-B, configs/dinov2/coco/panoptic/eomt_base_640.yaml:19), AdamW lr 1e-4, wd 0.05 on every parameter, llrd 0.8,
# warmup (500, 1000) + poly 0.9 (training/mask_classification_semantic.py:25-34), clip 0.01 (main.py:176-177), 31
# epochs of 1263 steps (configs/dinov2/ade20k/semantic/eomt_large_512.yaml:2), annealing U = 6520 laid out for 3 blocks
# (eomt_large_512.yaml:13-14, eomt_base_640.yaml:13-14), Mask2Former loss 2/5/5/0.1 with 12544 points
# (mask_classification_semantic.py:30-38), crop 512 and windowed inference (training/lightning_module.py:601-665).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
