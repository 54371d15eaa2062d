# BEiT v2 BEiT-B/16 masked image modeling on ImageNet-1k, 300 epochs: the 1600-epoch config with Adam beta2 0.98 and no
# drop path (unilm beit2/PRETRAINING.md). Published downstream: 85.0 top-1 after 100 epochs of fine-tuning.
_base_ = ['./beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py']
drop_path_rate = 0.0
model = dict(backbone=dict(drop_path_rate=drop_path_rate))
optim_wrapper = dict(optimizer=dict(betas=(0.9, 0.98)))
max_epochs = 300
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=10, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=10, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
