# ViT-Adapter-L on BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k
# fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 58.0 mIoU single scale, 58.4 multi-scale (czczup/ViT-Adapter segmentation/configs/ade20k/README.md:39).
# The released segmentor (upernet_beit_adapter_large_640_160k_ade20k.pth.tar) converts to this model with
#   python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head SRC DST
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), U = configs/ade20k/
# upernet_beit_adapter_large_640_160k_ade20k_ss.py; its _base_ (U:2-7): _base_/models/upernet_beit.py (UPerHead,
# FCN auxiliary head on level 2 with weight 0.4) and _base_/schedules/schedule_160k.py (160k iterations).
# Pinned value by value in tests/configs/test_vit_adapter_configs.py.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)  # U:8
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'  # U:10 (beit_large_patch16_224_pt22k_ft22k)
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # U:45-46
        std=[58.395, 57.12, 57.375],
        test_cfg=None),  # slide windows of the resized image, no padding (U:43; no Pad in U:59-74)
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',  # U:17-20: 1024 wide, 24 blocks, 16 heads, mlp ratio 4; qkv_bias (U:21): BEiT's q/v biases
        img_size=640,  # U:15
        patch_size=16,  # U:16
        use_abs_pos_emb=False,  # U:22
        use_rel_pos_bias=True,  # U:23
        layer_scale_init_value=1e-6,  # U:24 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.3,  # U:25
        conv_inplane=64,  # U:26
        n_points=4,  # U:27
        deform_num_heads=16,  # U:28
        cffn_ratio=0.25,  # U:29
        deform_ratio=0.5,  # U:30
        with_cp=True,  # U:31
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # U:32
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], num_classes=150, channels=1024),  # U:35-37
    auxiliary_head=dict(in_channels=1024, num_classes=150),  # U:40-41
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))  # U:43
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),  # U:49
    dict(type='RandomResize', scale=(2048, 640), ratio_range=(0.5, 2.0), keep_ratio=True),  # U:50
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # U:51
    dict(type='RandomFlip', prob=0.5),  # U:52
    dict(type='PhotoMetricDistortion'),  # U:53
    dict(type='PackSegInputs'),  # U:55 Pad: the data preprocessor's size pads to 640
]
train_pipeline_exact = train_pipeline  # this config trains with mmseg's transforms: the exact pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 640), keep_ratio=True),  # U:63, 67
    dict(type='ResizeToMultiple', size_divisor=32),  # U:68
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))  # U:83; x 8 GPUs (README.md:39 "8x2")
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 2e-5  # U:75
optim_wrapper = dict(
    # fp32 as ViT-Adapter (U:87 runner IterBasedRunner, not unilm's IterBasedRunnerAmp; schedule_160k.py:3
    # optimizer_config = dict(): no fp16 hook), no gradient clipping
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # U:75
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.90 over 24 blocks (U:76-77); no weight decay on 1-D parameters and biases only
    # (mmcv_custom/layer_decay_optimizer_constructor.py:74-75; its ('pos_embed', 'cls_token') never match prefixed
    # names); the adapter's parameters get the full lr (:21-44, BEiTAdapter.get_layer_depth)
    paramwise_cfg=dict(layer_decay_rate=0.90, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (U:78-82) as mmcv 1.x computes it (the warmup
# factor multiplies the poly lr of the same iteration): two chained schedulers, as configs/beit/*640x640.py
max_iters = 160000  # schedule_160k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=16000)  # U:89
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # U:88-89
# cuDNN as ViT-Adapter's launcher sets it: segmentation/dist_train.sh:9 passes --deterministic, so train.py:167
# (mmseg 0.x set_random_seed) sets cudnn.deterministic = True and cudnn.benchmark = False after train.py:107-108 set
# benchmark from the config's cudnn_benchmark = True (_base_/default_runtime.py:14); env_cfg.cudnn_deterministic is
# tools/train.py's cuDNN-only flag (not MMEngine's randomness.deterministic, see configs/beit/*640x640.py).
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
