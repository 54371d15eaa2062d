# CvT-13 + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, fp32, from microsoft/CvT's CvT-13 IN-1k file.
# Published: none (no CvT UPerNet recipe exists): mmseg's Swin-T UPerNet 160k recipe plus layer decay 0.9.
#   python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth \
#       checkpoints/cvt-13_in1k.pth
# A backbone of cvt-13_8xb256-300e_in1k.py or beit_cvt-13_8xb256-amp-coslr-300e_in1k.py loads directly:
#   init_cfg=dict(type='Pretrained', checkpoint='work_dirs/cvt-13_8xb256-300e_in1k/epoch_300.pth', prefix='backbone.'))
#   init_cfg=dict(type='Pretrained', checkpoint='work_dirs/beit_cvt-13_8xb256-amp-coslr-300e_in1k/epoch_300.pth',
#                 prefix='backbone.')).
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
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
