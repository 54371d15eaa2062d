# CvT-13 + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, from the ImageNet-1k CvT-13 checkpoint
# (microsoft/CvT CvT-13-224x224-IN-1k.pth; convert it first, the classifier head is dropped:
#   python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth \
#       checkpoints/cvt-13_in1k.pth
# A backbone trained with configs/cvt/cvt-13_8xb256-300e_in1k.py loads directly:
#   init_cfg=dict(type='Pretrained', checkpoint='work_dirs/cvt-13_8xb256-300e_in1k/epoch_300.pth', prefix='backbone.'))
# and so does one pretrained with configs/cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py (same ImageNet mean/std):
#   init_cfg=dict(type='Pretrained', checkpoint='work_dirs/beit_cvt-13_8xb256-amp-coslr-300e_in1k/epoch_300.pth',
#                 prefix='backbone.')).
# There is no published CvT UPerNet recipe. This follows mmseg's Swin UPerNet recipe (swin-tiny upernet 512x512
# 160k): AdamW lr 6e-5, betas (0.9, 0.999), wd 0.01 (none on norms, biases, cls_token), linear warmup 1500
# iterations from 1e-6 x lr, poly decay (power 1) to 0, batch 2 x 8; plus layer-wise lr decay 0.9 (BEiT's ADE20K
# value; CvT's get_layer_depth uses mmpretrain's Swin rule, num_layers = 13 + 2), which Swin's recipe does not use.
# Drop path per stage [0, 0, 0.1] (CvT-13's ImageNet value). Slide inference 512 / stride 341: whole-image inference of a 2048x512
# image would attend over 65k stage-0 tokens.
# Precision: fp32, as the Swin recipe (mmseg 0.x upernet_swin_tiny_..._pretrain_224x224_1K.py has no fp16 entry;
# schedule_160k.py's optimizer_config = dict()); pinned in tests/configs/reference_recipes.py.
_base_ = [
    '../_base_/models/upernet_cvt.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/cvt-13_in1k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch='cvt-13', drop_path_rate=(0.0, 0.0, 0.1), init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
base_lr = 6e-5
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.01),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9, no_decay_names=('cls_token', ), bias_decay_mult=0.0,
                       norm_decay_mult=0.0))
# mmseg 0.x swin config lr_config (poly, power 1, min_lr 0, linear warmup 1500 iterations, warmup_ratio 1e-6) as
# mmcv 1.x computes it (lr_updater.py: the warmup factor multiplies the poly lr of the same iteration, every
# iteration): two chained MMEngine schedulers (T = end - begin - 1).
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
