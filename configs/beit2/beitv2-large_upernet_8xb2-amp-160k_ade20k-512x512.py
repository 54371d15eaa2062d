# BEiT v2 BEiT-L + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, AMP, from the pretrained-only
# ImageNet-1k checkpoint unilm beitv2_large_patch16_224_pt1k.
# Published: 56.7 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K").
# Source: microsoft/unilm@768a3c87
# beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_512_slide_160k_ade20k.py.
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
