# BEiT-B/16 masked image modeling on ImageNet-1k, 300 epochs (mmpretrain's schedule: 83.1 top-1 after 100 epochs of
# fine-tuning); everything else as the 800-epoch paper recipe.
_base_ = ['./beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py']
max_epochs = 300
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=10, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=10, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
