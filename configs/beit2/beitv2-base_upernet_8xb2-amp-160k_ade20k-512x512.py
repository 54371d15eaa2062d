# BEiT v2 BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, AMP, from the pretrained-only
# ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k.
# Published: 53.1 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K").
# Source: microsoft/unilm@768a3c87
# beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_512_slide_160k_ade20k.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           test_cfg=None),
    backbone=dict(img_size=512, layer_scale_init_value=0.1, drop_path_rate=0.15, out_indices=(3, 5, 7, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
base_lr = 5e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.75, weight_decay_rule='unilm', no_decay_names=()))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
default_hooks = dict(checkpoint=dict(save_best=None))
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
randomness = dict(seed=0)
compile = dict(scope='model', devices=['cuda'])
