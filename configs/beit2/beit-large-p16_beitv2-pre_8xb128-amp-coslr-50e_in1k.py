# BEiT v2 BEiT-L/16 fine-tuned on ImageNet-1k from its 1600-epoch VQ-KD pretraining, 50 epochs, 8 GPUs x 128, AMP (128
# BEiT-L images per GPU may need model.backbone.with_cp=True).
# Published: 87.3 top-1 (unilm beit2/README.md, beitv2_large_patch16_224_pt1k_ft1k).
# Source: microsoft/unilm@768a3c87 beit2/get_started_for_image_classification.md (large).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k.pth \
#       checkpoints/beitv2-large_pt1k.pth
_base_ = ['./beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py']
pretrained = 'checkpoints/beitv2-large_pt1k.pth'
model = dict(
    backbone=dict(arch='large', drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=1024),
    head=dict(in_channels=1024))
base_lr = 2e-4
min_lr = 1e-6
optim_wrapper = dict(optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=0.8))
warmup_epochs = 5
max_epochs = 50
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min_ratio=min_lr / base_lr, by_epoch=True, begin=warmup_epochs,
         end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
