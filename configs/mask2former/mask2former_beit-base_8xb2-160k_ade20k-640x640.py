# Mask2Former on BEiT-B, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k fine-tuned
# checkpoint unilm beit_base_patch16_224_pt22k_ft22k (the one ViT-Adapter's Mask2Former BEiT configs start from; the
# UPerNet BEiT-B 640 config reads the same file):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: none for this setup. ViT-Adapter publishes Mask2Former + BEiT on ADE20K only with its adapter and BEiT-L
# (58.3 mIoU single scale, 640, 160k; ViT-Adapter segmentation/README.md:67); its BEiT-B Mask2Former runs are on
# COCO-Stuff-10k and Pascal Context (README.md:81,97).
#
# NOT the ViT-Adapter model: no adapter (spatial prior module and injector/extractor interactions around the ViT;
# that model is configs/vit_adapter/, which inherits this recipe with the adapter in
# mask2former_beit-adapter-base_8xb2-160k_ade20k-640x640.py). The plain BEiT-B feeds mmseg 1.2.2's Mask2FormerHead
# through beit_mm's pyramid neck (blocks 3, 5, 7, 11 -> Feature2Pyramid, as the UPerNet BEiT configs;
# configs/_base_/models/mask2former_beit.py). Expect less than the adapter's numbers; this config follows
# ViT-Adapter's Mask2Former BEiT recipe where it applies.
#
# Sources, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line):
# - A = configs/ade20k/mask2former_beit_adapter_large_640_160k_ade20k_ss.py (ViT-Adapter's ADE20K Mask2Former BEiT
#   recipe, BEiT-L): crop, data, test mode, warmup and poly schedule, weight decay, batch per GPU;
# - C = configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py (ViT-Adapter's BEiT-B
#   Mask2Former; configs/pascal_context/mask2former_beit_adapter_base_480_40k_pascal_context_59_ss.py has the same
#   values at lines 26, 36-37, 135, 137): the BEiT-B sizes, lr 3e-5, layer decay 0.95, drop path 0.2 and the 256-wide
#   head (A's BEiT-L values are lr 2e-5, layer decay 0.90 (A:137-139), drop path 0.3 (A:25), a 1024-wide head);
# - the head's structure and loss: configs/_base_/models/mask2former_beit.py (cites C and mmseg's M line by line).
#
# Known differences from ViT-Adapter's run (besides the adapter):
# - layer decay: ViT-Adapter's constructor (mmcv_custom/layer_decay_optimizer_constructor.py:28-37) puts the head's
#   query_embed, query_feat, level_embed, cls_embed and mask_embed at layer 0 (lr x 0.95^13 = x0.51 for BEiT-B);
#   beit_mm.LayerDecayOptimWrapperConstructor gives every parameter outside the backbone layer L + 1 (lr x 1). The
#   weight-decay rule is the same (unilm's: 1-D parameters and biases exempt, :74-75);
# - mmdet 3.3.0's head where ViT-Adapter ships its own port of Mask2Former (mmseg_custom/, mmdet 2.22): the same
#   values; the test resize rounds each side to a multiple of 32 with mmseg 1.x's ResizeToMultiple.
_base_ = [
    '../_base_/models/mask2former_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)  # mmdet's head parts
crop_size = (640, 640)  # A:8
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'  # A:10, C:10 (pt22k_ft22k)
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # A:107
        std=[58.395, 57.12, 57.375],  # A:107
        test_cfg=None),  # no padding at test time: slide windows of the resized image (A:103, no Pad in A:121-136)
    backbone=dict(
        img_size=640,  # A:15
        layer_scale_init_value=1e-6,  # A:24, C:24 (the checkpoint's gammas replace it)
        drop_path_rate=0.2,  # C:25
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))  # A:103
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),  # A:110
    dict(type='RandomResize', scale=(2048, 640), ratio_range=(0.5, 2.0), keep_ratio=True),  # A:111
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # A:112
    dict(type='RandomFlip', prob=0.5),  # A:113
    dict(type='PhotoMetricDistortion'),  # A:114
    dict(type='PackSegInputs'),  # A:116-119: the head makes the per-class masks (mmseg Mask2FormerHead)
]
train_pipeline_exact = train_pipeline  # this config trains with mmseg's transforms: the exact pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 640), keep_ratio=True),  # A:125,129
    dict(type='ResizeToMultiple', size_divisor=32),  # A:130
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))  # A:146; x 8 GPUs (README.md:123) = 16
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 3e-5  # C:134
optim_wrapper = dict(
    # fp32 as ViT-Adapter (A:150 runner IterBasedRunner; optimizer_config = dict(), _base_/schedules/schedule_160k.py:3:
    # no fp16 hook, no gradient clipping)
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # C:134, A:137
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.95 over 12 blocks (C:136); no weight decay on 1-D parameters and biases only
    # (mmcv_custom/layer_decay_optimizer_constructor.py:74-75: its ('pos_embed', 'cls_token') never match prefixed
    # names, so tokens and relative position tables decay)
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (A:140-145) as mmcv 1.x computes it (the
# warmup factor multiplies the poly lr of the same iteration): two chained MMEngine schedulers (T = end - begin - 1),
# as configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)  # schedule_160k.py:7, A:152
# cuDNN as ViT-Adapter's launcher sets it: segmentation/dist_train.sh:9 passes --deterministic, so train.py:167
# (mmseg 0.x set_random_seed) sets cudnn.deterministic = True and cudnn.benchmark = False after train.py:107-108 set
# benchmark from the config's cudnn_benchmark = True (_base_/default_runtime.py:14); env_cfg.cudnn_deterministic is
# tools/train.py's cuDNN-only flag (not MMEngine's randomness.deterministic, see configs/beit/*640x640.py).
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
