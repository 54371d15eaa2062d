# Mask2Former on ViT-Adapter-B over BEiT-B, COCO-Stuff-10k 512x512, 8 GPUs x 2 images, 40k iterations, from the
# ImageNet-22k fine-tuned BEiT-B (unilm beit_base_patch16_224_pt22k_ft22k; the adapter's own weights start at their
# init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: 50.0 mIoU single scale, 50.5 multi-scale, 120M parameters (czczup/ViT-Adapter segmentation/configs/
# coco_stuff10k/README.md:13). The released segmentor's backbone converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
# (its head is ViT-Adapter's mmdet 2.x port, whose names differ from mmseg 1.x's Mask2FormerHead: not converted).
# Data: configs/_base_/datasets/coco-stuff10k.py (mmseg's COCOStuffDataset, 171 classes, reduce_zero_label).
_base_ = [
    '../_base_/models/mask2former_beit.py', '../_base_/datasets/coco-stuff10k.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
crop_size = (512, 512)
scale = (2048, 512)
num_classes = 171
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        test_cfg=None),
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='base',
        img_size=512,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.2,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=12,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        with_cp=False,
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    decode_head=dict(
        in_channels=[768] * 4,
        num_classes=num_classes,
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 3e-5
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
max_iters = 40000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
