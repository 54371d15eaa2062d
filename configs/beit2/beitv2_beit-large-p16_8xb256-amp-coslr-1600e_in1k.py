# BEiT v2 BEiT-L/16 masked image modeling on ImageNet-1k, 1600 epochs, 8 GPUs x 256, AMP (BEiT-L at 256 per GPU needs
# model.backbone.with_cp=True or more GPUs). Published downstream: 87.3 top-1 after 50 epochs of fine-tuning, 56.7 mIoU
# ADE20K UPerNet. Source: microsoft/unilm@768a3c87 beit2/PRETRAINING.md "Large-size".
_base_ = ['./beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py']
model = dict(
    backbone=dict(arch='large', layer_scale_init_value=1e-5, cls_pretrain=dict(early_layers=21, head_layers=2)),
    head=dict(embed_dims=1024))
