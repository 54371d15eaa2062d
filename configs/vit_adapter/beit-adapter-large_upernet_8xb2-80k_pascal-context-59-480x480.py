# ViT-Adapter-L on BEiT-L + UPerNet, Pascal Context (59 classes) 480x480, 8 GPUs x 2 images, 80k iterations, from
# the ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at
# their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 67.0 mIoU single scale, 67.5 multi-scale (czczup/ViT-Adapter segmentation/configs/pascal_context/
# README.md:14). The released segmentor (upernet_beit_adapter_large_480_80k_pascal_context_59.pth.tar) converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
# Data: configs/_base_/datasets/pascal_context_59.py (mmseg's PascalContextDataset59, reduce_zero_label).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), S = configs/pascal_context/
# upernet_beit_adapter_large_480_80k_pascal_context_59_ss.py: its _base_ (S:2-7) _base_/models/upernet_beit.py,
# _base_/datasets/pascal_context_59.py, _base_/schedules/schedule_80k.py (80k iterations). The model and optimizer are
# those of the ADE20K config beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py (ViT-Adapter's files agree line
# by line, S:12-43 and S:76-83), at 480 (S:8, 16) with 59 classes (S:37, 42), slide stride 320 (S:44), training scale
# 520x520 (S:9, 51), test scale 4096x520 (S:64: the short side to 520) and 80k iterations.
# Pinned value by value in tests/configs/test_dataset_configs.py.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/pascal_context_59.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (480, 480)  # S:8
img_scale = (520, 520)  # S:9
test_scale = (4096, 520)  # S:64
num_classes = 59  # S:37, 42
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'  # S:11 (beit_large_patch16_224_pt22k_ft22k)
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # S:46-47
        std=[58.395, 57.12, 57.375],
        test_cfg=None),  # slide windows of the resized image, no padding (S:44; no Pad in S:60-75)
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',  # S:18-21: 1024 wide, 24 blocks, 16 heads, mlp ratio 4; qkv_bias (S:22): BEiT's q/v biases
        img_size=480,  # S:16
        patch_size=16,  # S:17
        use_abs_pos_emb=False,  # S:23
        use_rel_pos_bias=True,  # S:24
        layer_scale_init_value=1e-6,  # S:25 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.3,  # S:26
        conv_inplane=64,  # S:27
        n_points=4,  # S:28
        deform_num_heads=16,  # S:29
        cffn_ratio=0.25,  # S:30
        deform_ratio=0.5,  # S:31
        with_cp=True,  # S:32
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # S:33
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(in_channels=[1024] * 4, num_classes=num_classes, channels=1024),  # S:36-38
    auxiliary_head=dict(in_channels=1024, num_classes=num_classes),  # S:41-42
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(320, 320)))  # S:44
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),  # S:50 (0 = background -> 255)
    dict(type='RandomResize', scale=img_scale, ratio_range=(0.5, 2.0), keep_ratio=True),  # S:51
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # S:52
    dict(type='RandomFlip', prob=0.5),  # S:53
    dict(type='PhotoMetricDistortion'),  # S:54
    dict(type='PackSegInputs'),  # S:56 Pad: the data preprocessor's size pads to 480
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=test_scale, keep_ratio=True),  # S:64, 68
    dict(type='ResizeToMultiple', size_divisor=32),  # S:69
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))  # S:84; x 8 GPUs (README.md:14 "8x2")
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 2e-5  # S:76
optim_wrapper = dict(
    # fp32 as ViT-Adapter (S:88 runner IterBasedRunner; schedule_80k.py:3 optimizer_config = dict(): no fp16 hook),
    # no gradient clipping
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # S:76
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.90 over 24 blocks (S:77-78); no weight decay on 1-D parameters and biases only
    # (mmcv_custom/layer_decay_optimizer_constructor.py:74-75); the adapter's parameters get the full lr
    paramwise_cfg=dict(layer_decay_rate=0.90, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (S:79-83), as mmcv 1.x computes it: two
# chained schedulers (configs/vit_adapter/beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py says why)
max_iters = 80000  # schedule_80k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=8000)  # S:90
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # S:89-90
# cuDNN as ViT-Adapter's launcher sets it (segmentation/dist_train.sh:9 --deterministic; see the ADE20K config)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
