# EoMT on BEiT-L for COCO panoptic segmentation at 640x640: the official EoMT-L COCO panoptic 640 recipe
# (eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py, whose header cites every value in
# github.com/tue-mps/eomt @ 7bd19dd) with its DINOv2-L backbone swapped for BEiT-L, from the self-supervised (MIM,
# pretrained-only) ImageNet-22k checkpoint unilm beit_large_patch16_224_pt22k, as the ADE20K semantic BEiT-L EoMT
# config (eomt_beit-large_4xb4-amp-39k_ade20k-640x640.py): the shared relative position bias is copied into every block
# and resampled from 14x14 to 40x40 on load, and the file's final norm is the norm EoMT predicts from.
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones (tue-mps/eomt model_zoo/dinov2.md, dinov3.md;
# COCO panoptic EoMT-L 640, DINOv2: 56.0 PQ); no BEiT + EoMT number was found.
#
# Inherited unchanged from the official COCO panoptic 640 config (tue-mps/eomt @ 7bd19dd, path:line as there): 12 epochs
# of 7391 steps (configs/dinov2/coco/panoptic/eomt_large_640.yaml:2,13), validation every epoch, 4 GPUs x 4 images
# (README.md:124-131), 200 queries (eomt_large_640.yaml:18), L2 = 4 blocks with queries (models/eomt.py:24: the ViT-L
# default; BEiT-L has the same 24 blocks), 133 classes with stuff 80..132 (datasets/coco_panoptic.py:160,
# eomt_large_640.yaml:24), mask annealing starts 14782, 29564, 44346, 59128, ends 29564, 44346, 59128, 73910
# (eomt_large_640.yaml:13-14), AdamW lr 1e-4, wd 0.05, llrd 0.8 with llrd_l2_enabled (the EoMT layer-decay rule,
# beit_mm.EoMTLayerDecayOptimWrapperConstructor, which reads BEiT's block depths as the semantic BEiT EoMT configs),
# two-stage warmup (500, 1000) + poly 0.9, loss 2/5/5/0.1 with 12544 points (training/mask_classification_panoptic.py:
# 25-38), clip 0.01 (main.py:176-177), "16-mixed" (main.py:169), seed 0 (main.py:167), post-processing mask_thresh
# 0.8, overlap_thresh 0.8 (mask_classification_panoptic.py:39-40), large-scale jitter 0.1-2.0 into 640x640, random
# crop 640, flip 0.5, no colour jitter (coco_panoptic.py:159-162, datasets/transforms.py:37-39), test: fitted into
# 640x640 and padded (training/lightning_module.py:699-745); ImageNet mean/std (official models/vit.py:41-44), as the
# semantic BEiT EoMT configs and unilm's BEiT ADE20K fine-tuning of this checkpoint (its ImageNet-22k pretraining
# itself used 0.5/0.5: unilm beit/README.md, --imagenet_default_mean_and_std "for ImageNet-1k pre-training").
#
# The backbone (as eomt_beit-large_4xb4-amp-39k_ade20k-640x640.py builds it): BEiT-L (1024 wide, 24 blocks, 16 heads,
# patch 16, img_size 640 = the 40x40 grid), a relative position bias table per block (not shared, no absolute position
# embedding, no register tokens), layer scale (init 1e-5, BEiT-L pretraining's value; the checkpoint's gammas replace
# it), no drop path (models/eomt.py:185-195), final norm (models/eomt.py:175,197); the queries take the cls token's rows
# of the relative position bias (beit_mm/models/segmentors/eomt.py).
#
# Differences from the official run: the backbone (BEiT-L instead of DINOv2-L with 4 registers at patch 16); the rest
# as the official config's header (precision, compile, mean-colour padding, no crop re-draw, all-void images kept).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/models/eomt_beit-large.py']
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    backbone=dict(_delete_=True,  # none of the DINOv2 ViT's position embedding, registers or flags
                  **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
