# MIM study, stage 3: semantic segmentation fine-tuning of the study's tiny BEiT (patch 8, 128 wide, 6 blocks) +
# UPerNet on the labeled ADE20K-layout set (default: the generated 'shapes' set, 7 classes, raw ids 1..7), 64x64
# crops, 1 process x 8 images, 1200 iterations, from a MIM checkpoint (`mim_checkpoint`; the shared relative position
# bias is copied into every block on load) or from scratch with the same budget (model.backbone.init_cfg=None).
# Every arm of tools/analysis/mim_study.py uses this config unchanged except the backbone init and the seed.
#   python tools/train.py configs/studies/beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/mim_study/mim/tokens-blockwise_seed0/iter_3000.pth
# Another class count K (raw ids 1..K): tools/analysis/mim_study.py --num-classes K sets num_classes and the
# dataset's class names (ADE20K's first K names: mmseg maps the raw ids 1..K to 0..K-1 and ignores the rest).
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
mim_checkpoint = 'work_dirs/mim_study/mim/tokens-blockwise_seed0/iter_3000.pth'
data_root = 'data/shapes'
num_classes = 7
class_names = ('wall', 'building', 'sky', 'floor', 'tree', 'ceiling', 'road')
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 128
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=6, num_heads=4, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        drop_path_rate=0.1,
        out_indices=(1, 2, 3, 5),
        init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')),
    neck=dict(embed_dim=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=[embed_dims] * 4, channels=64, num_classes=num_classes, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=32, num_classes=num_classes, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
dataset = dict(data_root=data_root, metainfo=dict(classes=class_names))
train_dataloader = dict(batch_size=8, num_workers=2, dataset=dataset)
val_dataloader = dict(num_workers=2, dataset=dataset)
test_dataloader = val_dataloader
base_lr = 1e-3
max_iters = 1200
warmup_iters = 120
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.9,
        bias_decay_mult=0.0,
        norm_decay_mult=0.0,
        no_decay_names=('cls_token', 'mask_token', 'pos_embed', 'relative_position_bias_table', 'gamma_1', 'gamma_2',
                        'q_bias', 'v_bias')))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
auto_scale_lr = dict(enable=False, base_batch_size=8)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1, save_best=None))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
