# BEiT v2 BEiT-L/16 masked image modeling on ImageNet-1k with VQ-KD (CLIP) visual tokens and cls-token pretraining,
# 1600 epochs, 2048 images/step (8 GPUs x 256 here; unilm: 64 GPUs x 32), AMP. Published downstream: 87.3 top-1
# after 50 epochs of ImageNet fine-tuning, 56.7 mIoU ADE20K UPerNet 512 (unilm beit2/README.md; the segmentation
# config is beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py).
# Reference: unilm beit2/PRETRAINING.md "Large-size" (--model beit_large_patch16_224_8k_vocab_cls_pt --early_layers 21
# --head_layers 2 --layer_scale_init_value 1e-5 --drop_path 0.1 --opt_betas 0.9 0.999 --epochs 1600, the rest as the
# base recipe: --lr 1.5e-3 --warmup_epochs 10 --clip_grad 3.0, 75 masked patches, 224 bicubic second view, min crop
# 0.2, the same vqkd_encoder_base_decoder_3x768x12_clip tokenizer).
# Memory: with 256 images per GPU a BEiT-L step needs gradient checkpointing (model.backbone.with_cp=True) or more
# GPUs with fewer images each (keep processes x batch = 2048: tools/train.py warns otherwise).
_base_ = ['./beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py']
model = dict(
    backbone=dict(arch='large', layer_scale_init_value=1e-5, cls_pretrain=dict(early_layers=21, head_layers=2)),
    head=dict(embed_dims=1024))
