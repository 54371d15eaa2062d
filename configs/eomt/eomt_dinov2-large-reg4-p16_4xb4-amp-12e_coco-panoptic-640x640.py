# EoMT-L (DINOv2-style ViT-L/16 with 4 registers, as eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py) for
# COCO panoptic segmentation at 640x640: the official configuration, github.com/tue-mps/eomt @ 7bd19dd
# configs/dinov2/coco/panoptic/eomt_large_640.yaml with training/mask_classification_panoptic.py (the task module) and
# datasets/coco_panoptic.py + datasets/transforms.py (the data).
# Published: 56.0 PQ (COCO panoptic val2017; tue-mps/eomt model_zoo/dinov2.md:47-51; weights on HF:
# tue-mps/coco_panoptic_eomt_large_640).
#
# Start, as the official run: DINOv2-L with 4 registers, its patch embedding PI-resized to 16 px and its position
# embedding to 40x40 (beit_mm/converters/dinov2.py):
#   python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 640 --patch-size 16 \
#       vit_large_patch14_reg4_dinov2.lvd142m.safetensors checkpoints/dinov2-large-reg4_p16-640.pth
# Data: COCO 2017 in mmdet's layout under data/coco (train2017/, val2017/, annotations/panoptic_{train,val}2017.json
# and the PNG folders annotations/panoptic_{train,val}2017/), read by mmdet's CocoPanopticDataset (no panopticapi:
# beit_mm.LoadPanopticAnnotations; PQ/SQ/RQ from beit_mm.PanopticQualityMetric, panopticapi's rule).
#
# Official values (tue-mps/eomt @ 7bd19dd, path:line); the rest as the ADE20K DINOv2 config's header (AdamW lr 1e-4,
# wd 0.05, llrd 0.8 with llrd_l2_enabled, two-stage warmup (500, 1000) + poly 0.9, clip 0.01, loss 2/5/5/0.1 with 12544
# points, 4 GPUs x 4 images, "16-mixed", seed 0), which the panoptic module shares (mask_classification_panoptic.py:
# 25-38):
# - schedule: 12 epochs (eomt_large_640.yaml:2), validation every epoch; 7391 steps an epoch: the yaml's annealing
#   unit U = 14782 (eomt_large_640.yaml:13) is a sixth of the run as in every official config (ADE20K: 6520 of 39153
#   steps), 6 U = 88692 = 12 x 7391, i.e. the 118287 panoptic train2017 images less the few whose PNG holds one value
#   (datasets/dataset.py:135-139), in batches of 16 with drop_last (datasets/coco_panoptic.py:234);
# - model: 200 queries (eomt_large_640.yaml:18), L2 = 4 (models/eomt.py:24); 133 classes (coco_panoptic.py:160), the
#   stuff ones 80..132 (eomt_large_640.yaml:24) = mmdet's order (80 things, then 53 stuff); mask annealing starts 14782,
#   29564, 44346, 59128, ends 29564, 44346, 59128, 73910 (eomt_large_640.yaml:13-14); post-processing mask_thresh 0.8,
#   overlap_thresh 0.8 (mask_classification_panoptic.py:39-40);
# - data: large-scale jitter: the image fitted into 640x640 times a factor in [0.1, 2.0] (torchvision ScaleJitter,
#   coco_panoptic.py:162, transforms.py:38 = mmdet RandomResize of scale (640, 640), keep_ratio), padded to 640
#   bottom-right and cropped at random to 640 (transforms.py:39,84-94,109-110), horizontal flip 0.5 (transforms.py:
#   37,107); no colour jitter (color_jitter_enabled=False, coco_panoptic.py:161); crowd segments dropped for training
#   (transforms.py:104);
# - test: the image resized so that it fits 640x640 (longer side 640) and padded bottom-right to 640x640
#   (training/lightning_module.py:699-745), the masks back on the image (mask_classification_panoptic.py:106-109).
#
# Differences from the official run: the backbone, precision and compile as the ADE20K DINOv2 config's header; padding
# holds the mean colour (0 after normalization, the data preprocessor pads) instead of black; no re-draw of a crop
# that lost every segment (transforms.py:112-114); the few training images whose panoptic PNG is all void are kept
# (mmdet's CocoPanopticDataset filters on thing segments only, which would drop stuff-only images the official
# trains on). Crowd segments: mmdet's PackDetInputs moves them to ignored_instances, out of the targets.
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py']
data_root = 'data/coco/'
img_size = 640
pretrained = 'checkpoints/dinov2-large-reg4_p16-640.pth'
model = dict(
    data_preprocessor=dict(
        _delete_=True,
        type='mmdet.DetDataPreprocessor',
        mean=[123.675, 116.28, 103.53],  # ImageNet mean/std (official models/vit.py:41-44)
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_size_divisor=img_size,  # every image fits 640x640 (crop or resize): padded to exactly that, bottom-right
        pad_mask=True,
        mask_pad_value=0,
        pad_seg=True,
        seg_pad_value=255),
    backbone=dict(img_size=img_size, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    task='panoptic',
    num_classes=133,
    num_things_classes=80,
    num_queries=200,
    num_blocks=4,
    mask_thresh=0.8,
    overlap_thresh=0.8,
    mask_annealing=dict(start_steps=[14782, 29564, 44346, 59128], end_steps=[29564, 44346, 59128, 73910]),
    test_cfg=dict(_delete_=True, mode='whole'))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.RandomResize', scale=(img_size, img_size), ratio_range=(0.1, 2.0), keep_ratio=True,
         resize_type='mmdet.Resize'),  # mmdet's Resize (boxes, masks, panoptic map), not mmcv's
    dict(type='mmdet.RandomCrop', crop_size=(img_size, img_size), crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(img_size, img_size), keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(
    batch_size=4,  # x 4 GPUs = 16
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_train2017.json',
        data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),
        # the official keeps stuff-only images and drops only PNGs of a single value (datasets/dataset.py:135-139);
        # mmdet's filter_empty_gt=True would drop every image without a thing segment
        filter_cfg=dict(filter_empty_gt=False),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    dataset=dict(
        _delete_=True,
        type='mmdet.CocoPanopticDataset',
        data_root=data_root,
        ann_file='annotations/panoptic_val2017.json',
        data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='beit_mm.PanopticQualityMetric', classwise=True)
test_evaluator = val_evaluator
iters_per_epoch = 7391
max_iters = 12 * iters_per_epoch  # 88692
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None),
                     visualization=dict(type='mmdet.DetVisualizationHook'))  # mmdet's pictures (--show-dir)
custom_hooks = [  # default_runtime's without the ADE20K-layout dataset check; the annealing step
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
visualizer = dict(
    _delete_=True, type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')],
    name='visualizer')
tta_model = None
