# BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 1 image with 2-step gradient accumulation (effective 16), mixed
# precision, 160k iterations, from the ImageNet-22k fine-tuned checkpoint (unilm beit_large_patch16_224_pt22k_ft22k).
# Published: 56.7 mIoU (unilm), 56.33 (mmseg). Recipe as mmseg: lr 2e-5, layer decay 0.95, drop path 0.2,
# warmup 3000 iterations.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='large',
        img_size=640,
        layer_scale_init_value=1e-5,
        drop_path_rate=0.2,
        out_indices=(7, 11, 15, 23),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(embed_dim=1024),
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], channels=1024),
    auxiliary_head=dict(in_channels=1024),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))
base_lr = 2e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='bfloat16',  # bf16 needs no loss scaling; on GPUs without bf16 (V100) use dtype='float16', loss_scale='dynamic'
    accumulative_counts=2,
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.95,
        bias_decay_mult=0.0,
        norm_decay_mult=0.0,
        no_decay_names=('cls_token', 'mask_token', 'pos_embed', 'relative_position_bias_table', 'gamma_1', 'gamma_2',
                        'q_bias', 'v_bias')))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / base_lr, by_epoch=False, begin=0, end=3000),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=3000, end=160000),
]
train_dataloader = dict(batch_size=1)  # x 8 GPUs x 2 accumulation steps = 16
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
