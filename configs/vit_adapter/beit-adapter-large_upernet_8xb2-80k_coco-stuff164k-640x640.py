# ViT-Adapter-L on BEiT-L + UPerNet, COCO-Stuff-164k 640x640, 8 GPUs x 2 images, 80k iterations, from the
# ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at their
# init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 50.5 mIoU single scale, 50.7 multi-scale (czczup/ViT-Adapter segmentation/configs/coco_stuff164k/
# README.md:13). The released segmentor (upernet_beit_adapter_large_640_80k_cocostuff164k.pth.tar) converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
# Data: configs/_base_/datasets/coco-stuff164k.py (mmseg's COCOStuffDataset, 171 classes, no reduce_zero_label).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), S = configs/coco_stuff164k/
# upernet_beit_adapter_large_640_80k_cocostuff164k_ss.py: its _base_ (S:2-7) _base_/models/upernet_beit.py, _base_/
# datasets/coco-stuff164k.py, _base_/schedules/schedule_80k.py (80k iterations). The model and optimizer are those of
# the ADE20K config beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py (ViT-Adapter's files agree line by line,
# S:11-44 and S:75-82), with 171 classes (S:36, 41), the 2560x640 scale (S:50, 63) and 80k iterations.
# Pinned value by value in tests/configs/test_dataset_configs.py.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/coco-stuff164k.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)  # S:8
scale = (2560, 640)  # S:50, 63
num_classes = 171  # S:36, 41
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'  # S:10 (beit_large_patch16_224_pt22k_ft22k)
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # S:45-46
        std=[58.395, 57.12, 57.375],
        test_cfg=None),  # slide windows of the resized image, no padding (S:43; no Pad in S:59-74)
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',  # S:17-20: 1024 wide, 24 blocks, 16 heads, mlp ratio 4; qkv_bias (S:21): BEiT's q/v biases
        img_size=640,  # S:15
        patch_size=16,  # S:16
        use_abs_pos_emb=False,  # S:22
        use_rel_pos_bias=True,  # S:23
        layer_scale_init_value=1e-6,  # S:24 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.3,  # S:25
        conv_inplane=64,  # S:26
        n_points=4,  # S:27
        deform_num_heads=16,  # S:28
        cffn_ratio=0.25,  # S:29
        deform_ratio=0.5,  # S:30
        with_cp=True,  # S:31
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # S:32
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(in_channels=[1024] * 4, num_classes=num_classes, channels=1024),  # S:35-37
    auxiliary_head=dict(in_channels=1024, num_classes=num_classes),  # S:40-41
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))  # S:43
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),  # S:49 (no reduce_zero_label: 0 is "person")
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),  # S:50
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # S:51
    dict(type='RandomFlip', prob=0.5),  # S:52
    dict(type='PhotoMetricDistortion'),  # S:53
    dict(type='PackSegInputs'),  # S:55 Pad: the data preprocessor's size pads to 640
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),  # S:63, 67
    dict(type='ResizeToMultiple', size_divisor=32),  # S:68
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))  # S:83; x 8 GPUs (README.md:13 "8x2")
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 2e-5  # S:75
optim_wrapper = dict(
    # fp32 as ViT-Adapter (S:87 runner IterBasedRunner; schedule_80k.py:3 optimizer_config = dict(): no fp16 hook),
    # no gradient clipping
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # S:75
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.90 over 24 blocks (S:76-77); no weight decay on 1-D parameters and biases only
    # (mmcv_custom/layer_decay_optimizer_constructor.py:74-75); the adapter's parameters get the full lr
    paramwise_cfg=dict(layer_decay_rate=0.90, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (S:78-82), as mmcv 1.x computes it: two
# chained schedulers (configs/vit_adapter/beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py says why)
max_iters = 80000  # schedule_80k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=8000)  # S:89
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # S:88-89
# cuDNN as ViT-Adapter's launcher sets it (segmentation/dist_train.sh:9 --deterministic; see the ADE20K config)
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
