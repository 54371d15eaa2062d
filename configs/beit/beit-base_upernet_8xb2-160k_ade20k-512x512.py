# BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, from a self-supervised (MIM, pretrained-only)
# checkpoint: the shared relative position bias is copied into every block on load. BEiT paper Table 3: 45.6 mIoU
# from ImageNet-1k self-supervision only (47.7 with intermediate ImageNet-1k fine-tuning). Recipe: lr 7e-4, layer
# decay 0.65 (unilm semantic_segmentation README for pretrained-only checkpoints).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth \
#       checkpoints/beit-base_pt22k.pth
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beit-base_pt22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=512, drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
base_lr = 7e-4
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.65,
        bias_decay_mult=0.0,
        norm_decay_mult=0.0,
        no_decay_names=('cls_token', 'mask_token', 'pos_embed', 'relative_position_bias_table', 'gamma_1', 'gamma_2',
                        'q_bias', 'v_bias')))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / base_lr, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=160000),
]
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
