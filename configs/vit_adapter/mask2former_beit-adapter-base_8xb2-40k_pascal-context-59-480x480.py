# Mask2Former on ViT-Adapter-B over BEiT-B, Pascal Context (59 classes) 480x480, 8 GPUs x 2 images, 40k iterations,
# from the ImageNet-22k fine-tuned BEiT-B (unilm beit_base_patch16_224_pt22k_ft22k; the adapter's own weights start at
# their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: 64.0 mIoU single scale, 64.4 multi-scale, 120M parameters (czczup/ViT-Adapter segmentation/configs/
# pascal_context/README.md:13). The released segmentor's backbone converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
# (its head is ViT-Adapter's mmdet 2.x port, whose names differ from mmseg 1.x's Mask2FormerHead: not converted).
# Data: configs/_base_/datasets/pascal_context_59.py (mmseg's PascalContextDataset59, reduce_zero_label).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), C = configs/pascal_context/
# mask2former_beit_adapter_base_480_40k_pascal_context_59_ss.py: its _base_ (C:2-7) _base_/models/
# mask2former_beit_pascal.py (59 = 29 things + 30 stuff classes, :2-4; otherwise _base_/models/mask2former_beit.py,
# whose values configs/_base_/models/mask2former_beit.py here has line by line), _base_/datasets/pascal_context_59.py,
# _base_/schedules/schedule_40k.py (40k iterations). The file is ViT-Adapter's COCO-Stuff-10k BEiT-B config (the
# recipe of mask2former_beit-adapter-base_8xb2-40k_coco-stuff10k-512x512.py) with one more line (img_scale, C:9) and
# 480 crops (C:8, 16), slide stride 320 (C:101), training scale 520x520 (C:9, 109), test scale 4096x520 (C:123).
# Pinned value by value in tests/configs/test_dataset_configs.py.
_base_ = [
    '../_base_/models/mask2former_beit.py', '../_base_/datasets/pascal_context_59.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)  # mmdet's head parts
crop_size = (480, 480)  # C:8
img_scale = (520, 520)  # C:9
test_scale = (4096, 520)  # C:123
num_classes = 59  # mask2former_beit_pascal.py:2-4
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'  # C:11 (beit_base_patch16_224_pt22k_ft22k)
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # C:104-105
        std=[58.395, 57.12, 57.375],
        test_cfg=None),  # slide windows of the resized image, no padding (C:101; no Pad in C:119-134)
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='base',  # C:18-21: 768 wide, 12 blocks, 12 heads, mlp ratio 4; qkv_bias (C:22): BEiT's q/v biases
        img_size=480,  # C:16
        patch_size=16,  # C:17
        use_abs_pos_emb=False,  # C:23
        use_rel_pos_bias=True,  # C:24
        layer_scale_init_value=1e-6,  # C:25 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.2,  # C:26
        conv_inplane=64,  # C:27
        n_points=4,  # C:28
        deform_num_heads=12,  # C:29
        cffn_ratio=0.25,  # C:30
        deform_ratio=0.5,  # C:31
        with_cp=False,  # none in C: beit_adapter.py:25 default
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],  # C:32
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(
        in_channels=[768] * 4,  # C:35; the 256-wide head (C:36-37), 100 queries (C:38) as the base config
        num_classes=num_classes,
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),  # mask2former_beit_pascal.py:98
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(320, 320)))  # C:101
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),  # C:108
    dict(type='RandomResize', scale=img_scale, ratio_range=(0.5, 2.0), keep_ratio=True),  # C:109
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # C:110
    dict(type='RandomFlip', prob=0.5),  # C:111
    dict(type='PhotoMetricDistortion'),  # C:112
    dict(type='PackSegInputs'),  # C:114-117: the head makes the per-class masks (mmseg Mask2FormerHead)
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),  # C:123, 127
    dict(type='ResizeToMultiple', size_divisor=32),  # C:128
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))  # C:144; x 8 GPUs (README.md:13 "8x2")
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 3e-5  # C:135
optim_wrapper = dict(
    # fp32 as ViT-Adapter (C:148 runner IterBasedRunner; schedule_40k.py:3 optimizer_config = dict(): no fp16 hook),
    # no gradient clipping
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # C:135
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.95 over 12 blocks (C:136-137); no weight decay on 1-D parameters and biases only
    # (mmcv_custom/layer_decay_optimizer_constructor.py:74-75)
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (C:138-143), as mmcv 1.x computes it: two
# chained schedulers (configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py says why)
max_iters = 40000  # schedule_40k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=4000)  # C:150
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # C:149-150
# cuDNN as ViT-Adapter's launcher sets it (segmentation/dist_train.sh:9 --deterministic; see the ADE20K configs)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
