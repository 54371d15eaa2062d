# BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 1 image with 2-step gradient accumulation, 320k iterations = 160k updates,
# mixed precision, from the ImageNet-22k fine-tuned checkpoint unilm beit_large_patch16_224_pt22k_ft22k.
# Published: 56.7 mIoU (unilm beit/README.md), 56.33 (mmseg 0.x configs/beit/README.md).
# Source: microsoft/unilm@768a3c87
# beit/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_640_slide_160k_ade20k_pt2ft.py.
_base_ = ['./beit-base_upernet_8xb2-160k_ade20k-640x640.py']
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    backbone=dict(
        arch='large',
        layer_scale_init_value=1e-6,
        drop_path_rate=0.2,
        out_indices=(7, 11, 15, 23),
        init_cfg=dict(checkpoint=pretrained)),
    neck=dict(embed_dim=1024),
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], channels=1024),
    auxiliary_head=dict(in_channels=1024))
base_lr = 2e-5
optim_wrapper = dict(accumulative_counts=2, optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=0.95))
max_iters = 320000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=3000 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=32000)
default_hooks = dict(checkpoint=dict(interval=32000))
train_dataloader = dict(batch_size=1)
