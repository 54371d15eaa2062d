# BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, mixed precision, from the pretrained-only
# ImageNet-22k checkpoint unilm beit_base_patch16_224_pt22k. Published: none for this checkpoint.
# Source: microsoft/unilm@768a3c87
# beit/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_512_slide_160k_ade20k_pt.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth \
#       checkpoints/beit-base_pt22k.pth
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beit-base_pt22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           test_cfg=None),
    backbone=dict(img_size=512, drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
base_lr = 7e-4
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.65, weight_decay_rule='unilm', no_decay_names=()))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
randomness = dict(seed=0)
compile = dict(scope='model', devices=['cuda'])
