# CvT's ImageNet schedule (microsoft/CvT experiments/imagenet/cvt/cvt-13-224x224.yaml): AdamW, LR 2.5e-4 per GPU at
# 256 images per GPU, which the official code multiplies by the number of GPUs (lib/config/default.py: TRAIN.LR *=
# world_size when SCALE_LR) -> lr 2e-3 at 8 x 256 = 2048; wd 0.05, none on norms (LayerNorm, BatchNorm), biases and
# cls_token (WITHOUT_WD_LIST ['bn', 'bias', 'ln'] + no_weight_decay()); 5 warmup epochs from 1e-6, cosine to 1e-5,
# 300 epochs.
base_lr = 2.5e-4 * 8
warmup_epochs = 5
max_epochs = 300
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, no_decay_names=('cls_token', ), bias_decay_mult=0.0,
                       norm_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / base_lr, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(enable=False, base_batch_size=2048)
