# ViT-Adapter-L on BEiT-L + UPerNet, Pascal Context (59 classes) 480x480, 8 GPUs x 2 images, 80k iterations, from
# the ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at
# their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 67.0 mIoU single scale, 67.5 multi-scale (czczup/ViT-Adapter segmentation/configs/pascal_context/
# README.md:14). The released segmentor (upernet_beit_adapter_large_480_80k_pascal_context_59.pth.tar) converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
# Data: configs/_base_/datasets/pascal_context_59.py (mmseg's PascalContextDataset59, reduce_zero_label).
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/pascal_context_59.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (480, 480)
img_scale = (520, 520)
test_scale = (4096, 520)
num_classes = 59
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        test_cfg=None),
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',
        img_size=480,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.3,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=16,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        with_cp=True,
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    decode_head=dict(in_channels=[1024] * 4, num_classes=num_classes, channels=1024),
    auxiliary_head=dict(in_channels=1024, num_classes=num_classes),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(320, 320)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=img_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 2e-5
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.90, weight_decay_rule='unilm', no_decay_names=()))
max_iters = 80000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=8000)
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
