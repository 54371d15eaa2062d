# BEiT v2 BEiT-L + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, mixed precision, from the BEiT v2
# pretrained-only ImageNet-1k checkpoint unilm beitv2_large_patch16_224_pt1k (1600 epochs of VQ-KD MIM).
# Published: 56.7 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K", BEiTv2-large, beitv2_large_patch16_224_pt1k).
# Reference: unilm beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_512_slide_160k_ade20k.py
# (lines 21-33: embed_dim 1024, depth 24, heads 16, init_values 1e-6, drop_path_rate 0.2, out_indices [7, 11, 15, 23];
# lines 36-42: UPerHead channels 1024; line 44: slide crop 512 stride 341; lines 47-49: AdamW 4e-5, wd 0.05, layer
# decay 0.9 over 24 layers; lines 51-55: poly + linear warmup 1500 iterations, warmup_ratio 1e-6; line 58: 2 images
# per GPU; lines 60-71: IterBasedRunnerAmp, use_fp16). The rest as the base config.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k.pth \
#       checkpoints/beitv2-large_pt1k.pth
_base_ = ['./beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-large_pt1k.pth'
model = dict(
    backbone=dict(arch='large', layer_scale_init_value=1e-6, drop_path_rate=0.2, out_indices=(7, 11, 15, 23),
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(embed_dim=1024),
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], channels=1024),
    auxiliary_head=dict(in_channels=1024))
base_lr = 4e-5
optim_wrapper = dict(optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=0.9))
