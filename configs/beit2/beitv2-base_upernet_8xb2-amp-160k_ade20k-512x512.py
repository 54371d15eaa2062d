# BEiT v2 BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, AMP, from the pretrained-only
# ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k.
# Published: 53.1 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K").
# Source: microsoft/unilm@768a3c87
# beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_512_slide_160k_ade20k.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = ['../beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(
    backbone=dict(layer_scale_init_value=0.1, drop_path_rate=0.15, out_indices=(3, 5, 7, 11),
                  init_cfg=dict(checkpoint=pretrained)))
base_lr = 5e-5
optim_wrapper = dict(optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=0.75))
default_hooks = dict(checkpoint=dict(save_best=None))
