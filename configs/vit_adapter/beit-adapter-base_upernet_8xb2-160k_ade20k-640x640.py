# ViT-Adapter-B on BEiT-B + UPerNet, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k
# fine-tuned BEiT-B (unilm beit_base_patch16_224_pt22k_ft22k, the file ViT-Adapter's BEiT-B configs start from, C:10;
# the adapter's own weights start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: none for ADE20K. ViT-Adapter publishes no UPerNet run of its BEiT-B adapter on any dataset; its BEiT-B
# adapter runs are Mask2Former on COCO-Stuff-10k (50.0 mIoU ss / 50.5 ms, segmentation/README.md:81) and Pascal
# Context 59 (64.0 / 64.4, segmentation/README.md:97); on ADE20K its UPerNet BEiT run is BEiT-L (58.0 / 58.4, 640,
# 160k; segmentation/README.md:66, beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py here) and its UPerNet B
# runs are ViT-Adapter-B on DeiT-B (48.8 / 49.7, 512; segmentation/README.md:61) and AugReg-B (51.9 / 52.5, 512;
# segmentation/README.md:63).
#
# The recipe: ViT-Adapter's ADE20K UPerNet BEiT-L recipe (U) with the BEiT-B values of C, at 640, not the ViT-B
# adapter UPerNet recipe (D, 512). Why: D's values are tuned for a different backbone and checkpoint (DeiT-B from
# ImageNet-1k, absolute position embeddings, no layer scale: lr 6e-5, weight decay 0.01, drop path 0.3, fp16; D:18,
# 49, 64), while this model is BEiT with its relative position bias and layer scale from the same pt22k_ft22k file
# as C, and every ViT-Adapter BEiT recipe on ADE20K trains at 640 (U:8, M:8). It also keeps both BEiT-B adapter
# configs here and the plain BEiT-B baselines (configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py,
# configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py) on one crop, schedule and checkpoint.
#
# Sources, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line):
# - U = configs/ade20k/upernet_beit_adapter_large_640_160k_ade20k_ss.py; its _base_ (U:2-7): _base_/models/
#   upernet_beit.py (UPerHead, FCN auxiliary head on level 2, 256 channels, weight 0.4) and _base_/schedules/
#   schedule_160k.py (S: 160k iterations): crop, data, slide test, warmup and poly schedule, weight decay, batch;
# - C = configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py: the BEiT-B adapter sizes
#   (C:17-31), drop path 0.2 (C:25), lr 3e-5 (C:134), layer decay 0.95 over 12 blocks (C:136); no with_cp in C, so
#   the official default with_cp=False (mmseg_custom/models/backbones/beit_adapter.py:25);
# - D = configs/ade20k/upernet_deit_adapter_base_512_160k_ade20k.py (not used; see above).
# The head's widths: U sets UPerHead's in_channels and channels to the ViT width (U:35-37, 1024 for BEiT-L) and the
# auxiliary head's input to it (U:40); at BEiT-B's width that is 768, as unilm's BEiT-B UPerNet at 640
# (microsoft/unilm@768a3c87 beit/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_640_slide_160k_
# ade20k_pt2ft.py:37-42) and configs/beit/ here (D's head, upernet_r50.py:22, is 512 wide).
# Pinned value by value in tests/test_vit_adapter_configs.py.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)  # U:8
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'  # C:10 (beit_base_patch16_224_pt22k_ft22k)
width = 768  # C:17
model = dict(
    data_preprocessor=dict(
        size=crop_size,
        mean=[123.675, 116.28, 103.53],  # U:45-46
        std=[58.395, 57.12, 57.375],
        test_cfg=None),  # slide windows of the resized image, no padding (U:43; no Pad in U:59-74)
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='base',  # C:17-20: 768 wide, 12 blocks, 12 heads, mlp ratio 4; qkv_bias (C:21): BEiT's q/v biases
        img_size=640,  # U:15 (C:15 is its 512 crop)
        patch_size=16,  # C:16
        use_abs_pos_emb=False,  # C:22
        use_rel_pos_bias=True,  # C:23
        layer_scale_init_value=1e-6,  # C:24 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.2,  # C:25
        conv_inplane=64,  # C:26
        n_points=4,  # C:27
        deform_num_heads=12,  # C:28
        cffn_ratio=0.25,  # C:29
        deform_ratio=0.5,  # C:30
        with_cp=False,  # none in C: beit_adapter.py:25 default
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],  # C:31
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(in_channels=[width] * 4, num_classes=150, channels=width),  # U:35-37 at BEiT-B's width
    auxiliary_head=dict(in_channels=width, channels=256, num_classes=150),  # U:40-41; upernet_beit.py:44
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
base_lr = 3e-5  # C:134 (U:75 has BEiT-L's 2e-5)
optim_wrapper = dict(
    type='OptimWrapper',  # fp32, no gradient clipping (schedule_160k.py:3 optimizer_config = dict())
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),  # C:134, U:75
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # layer decay 0.95 over 12 blocks (C:135-136; U:77 has BEiT-L's 0.90); no weight decay on 1-D parameters and
    # biases only (mmcv_custom/layer_decay_optimizer_constructor.py:74-75; its ('pos_embed', 'cls_token') never match
    # prefixed names); the adapter's parameters get the full lr (:21-44, BEiTAdapter.get_layer_depth)
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
# poly, power 1, min_lr 0, linear warmup 1500 iterations from 1e-6 x lr (U:78-82, = C:137-142) as mmcv 1.x computes
# it (the warmup factor multiplies the poly lr of the same iteration): two chained schedulers, as
# configs/beit/*640x640.py
max_iters = 160000  # schedule_160k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=16000)  # U:89
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # U:88-89
