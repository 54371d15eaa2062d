# Mask2Former panoptic segmentation (mmdet 3.3.0's Mask2Former, Mask2FormerHead, MaskFormerFusionHead) on
# ViT-Adapter-L over BEiT v2-L, COCO panoptic (133 classes: 80 things, 53 stuff), 16 GPUs x 1 image, 265.5k iterations
# ("3x"), DETR-style multi-scale training, from the BEiT v2-L ImageNet-1k pretrained, ImageNet-21k fine-tuned weights
# (unilm beitv2_large_patch16_224_pt1k_ft21k; the adapter's own weights start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
# Published: 58.4 PQ (things 65.0, stuff 48.4), 52.9 box AP, 48.9 mask AP on COCO val2017 (czczup/ViT-Adapter
# detection/configs/mask2former/README.md:64, its evaluation output :79-84).
#
# Source, czczup/ViT-Adapter@fd64a51 detection/ (path:line), P = configs/mask2former/
# mask2former_beitv2_adapter_large_16x1_3x_coco-panoptic.py (mmdet 2.x; its base configs/_base_/datasets/
# coco_panoptic.py = B). The head values are mmdet's COCO panoptic ones (P:39-160 = the base model config's, see
# configs/_base_/models/mask2former_beit_coco-panoptic.py), in mmdet 3.x names. Pinned value by value in
# tests/models/test_panoptic_mask2former.py. Known differences:
# - P:29-36 runs the blocks in 14x14 windows (every 6th block in 56x56 windows, i.e. global at 896): beit_mm's BEiT
#   has global attention only, so every block attends globally (same weights; more memory at 1333x800).
# - P:272-278 keeps an EMA of the weights (mmdet 2.x ExpMomentumEMAHook, momentum 1e-4): mmdet 3.x's EMAHook with
#   ExpMomentumEMA, the same update.
# - PQ from beit_mm.PanopticQualityMetric (panopticapi's rule; mmdet's CocoPanopticMetric needs panopticapi), box and
#   mask AP from mmdet's CocoMetric (P:271 metric=['PQ', 'bbox', 'segm']).
_base_ = ['../_base_/models/mask2former_beit_coco-panoptic.py', '../_base_/default_runtime.py']
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'  # P:8 (beitv2_large_patch16_224_pt1k_ft21k)
data_root = 'data/coco/'  # B:2
num_things_classes = 80  # P:4
num_stuff_classes = 53  # P:5
width = 1024
model = dict(
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53],  # P:164 (ImageNet's, not BEiT's [-1, 1])
        std=[58.395, 57.12, 57.375],  # P:164
        bgr_to_rgb=True,  # P:164 to_rgb
        pad_size_divisor=32),  # P:203
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',  # P:15-18: 1024 wide, 24 blocks, 16 heads, mlp ratio 4; qkv_bias (P:19): BEiT's q/v biases
        img_size=224,  # P:13
        patch_size=16,  # P:14
        use_abs_pos_emb=False,  # P:20
        use_rel_pos_bias=True,  # P:21
        layer_scale_init_value=1e-6,  # P:22 init_values
        drop_path_rate=0.4,  # P:23
        conv_inplane=64,  # P:24
        n_points=4,  # P:25
        deform_num_heads=16,  # P:26
        cffn_ratio=0.25,  # P:27
        deform_ratio=0.5,  # P:28
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # P:37
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    panoptic_head=dict(in_channels=[width] * 4))  # P:41
backend_args = None
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile', to_float32=True),  # P:166
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),  # P:167-171
    dict(type='mmdet.RandomFlip', prob=0.5),  # P:172
    dict(
        type='mmdet.RandomChoice',  # P:173 AutoAugment: one of the two policies
        transforms=[
            [
                dict(type='mmdet.RandomChoiceResize',
                     scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                             (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],  # P:177-179
                     keep_ratio=True,  # P:181
                     resize_type='mmdet.Resize')  # (mmcv's Resize in scope mmseg: no boxes/masks)
            ],
            [
                dict(type='mmdet.RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)],  # P:185
                     keep_ratio=True, resize_type='mmdet.Resize'),  # P:187
                dict(type='mmdet.RandomCrop', crop_type='absolute_range', crop_size=(384, 600),  # P:189-190
                     allow_negative_crop=True),  # P:191
                dict(type='mmdet.RandomChoiceResize',
                     scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                             (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],  # P:193-196
                     keep_ratio=True,  # P:199
                     resize_type='mmdet.Resize')
            ]
        ]),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),  # P:210
    dict(type='mmdet.Resize', scale=(1333, 800), keep_ratio=True),  # P:213, P:216
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(
    batch_size=1,  # P:226 samples_per_gpu (x 16 GPUs)
    num_workers=2,  # P:227
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',  # B:3
        data_root=data_root,
        ann_file='annotations/panoptic_train2017.json',  # B:41
        data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),  # B:42-43
        filter_cfg=dict(filter_empty_gt=True),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_val2017.json',  # B:46
        data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),  # B:47-48
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = [
    dict(type='beit_mm.PanopticQualityMetric', classwise=True),  # P:271 'PQ'
    dict(type='mmdet.CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json',  # P:231
         metric=['bbox', 'segm']),  # P:271
]
test_evaluator = val_evaluator
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),  # P:239
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',  # P:240
    paramwise_cfg=dict(layer_decay_rate=0.90),  # P:241 (num_layers=24: the backbone's blocks)
    clip_grad=dict(max_norm=0.01, norm_type=2))  # P:242
max_iters = 265500  # P:255
param_scheduler = [  # P:245-253: step decay, warmup_ratio=1.0 is no warmup
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters, milestones=[191750, 236000], gamma=0.1)
]
interval = 5000  # P:263
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=interval,
                 dynamic_intervals=[(max_iters // interval * interval + 1, max_iters)])  # P:267
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),  # P:259
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=interval, save_last=True,
                    max_keep_ckpts=3),  # P:265-266
    visualization=dict(type='mmdet.DetVisualizationHook'))  # mmdet's pictures (--show-dir)
custom_hooks = [
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='mmdet.EMAHook', ema_type='mmdet.ExpMomentumEMA', momentum=0.0001, update_buffers=True,
         priority=49),  # P:272-278 (mmdet 2.x's EMA hooks average the buffers too: skip_buffers=False)
]
auto_scale_lr = dict(enable=False, base_batch_size=16)  # 16 GPUs x 1 image (P:226, the file name's 16x1)
visualizer = dict(_delete_=True, type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
tta_model = None
