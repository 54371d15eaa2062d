# EoMT-L (DINOv2-style ViT-L/16 with 4 registers) for ADE20K panoptic segmentation at 640x640, fine-tuned from the
# COCO panoptic EoMT-L 640: the official configuration, github.com/tue-mps/eomt @ 7bd19dd
# configs/dinov2/ade20k/panoptic/eomt_large_640.yaml with training/mask_classification_panoptic.py (the task module)
# and datasets/ade20k_panoptic.py + datasets/transforms.py (the data).
# Published: 50.6 PQ (ADE20K panoptic val, "pre-trained on COCO panoptic"; tue-mps/eomt model_zoo/dinov2.md:114-120,
# 155; weights on HF: tue-mps/ade20k_panoptic_eomt_large_640).
#
# Start, as the official run (README.md:136-144: --model.ckpt_path with --model.load_ckpt_class_head False): the COCO
# panoptic EoMT-L 640 without its class head, from the HF folder tue-mps/coco_panoptic_eomt_large_640:
#   python tools/convert_checkpoint.py --model eomt --source hf --drop-class-head model.safetensors \
#       checkpoints/eomt-large-640_coco-panoptic_no-class-head.pth
# The official ADE20K panoptic weights (HF tue-mps/ade20k_panoptic_eomt_large_640) keep ADE20K's class order; they
# evaluate with this config after their class head is put in mmdet's order (things first):
#   python tools/convert_checkpoint.py --model eomt --source hf --class-order ade20k-panoptic model.safetensors \
#       checkpoints/eomt-large-640_ade20k-panoptic.pth
# Data: ADEChallengeData2016 under data/ade with the scene-parsing challenge's instance PNGs unpacked into it
# (annotations_instance.tar -> ADEChallengeData2016/annotations_instance/{training,validation}/), read by
# beit_mm.ADE20KPanopticDataset as the official reads the two zips (no conversion, no panopticapi).
#
# Official values (path:line); the rest as the COCO panoptic 640 config (eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-
# panoptic-640x640.py: AdamW lr 1e-4, wd 0.05, llrd 0.8 with llrd_l2_enabled, two-stage warmup (500, 1000) + poly 0.9,
# clip 0.01, loss 2/5/5/0.1 with 12544 points, 200 queries, L2 = 4, mask_thresh and overlap_thresh 0.8, 4 GPUs x 4
# images, "16-mixed", seed 0, large-scale jitter 0.1-2.0 of 640, pad and crop 640, flip 0.5, test fit 640 + pad):
# - schedule: 31 epochs (eomt_large_640.yaml:2), validation every epoch; 1263 steps an epoch (the 20210 ADE20K
#   training images in batches of 16 with drop_last, datasets/ade20k_panoptic.py:216-225), as the ADE20K semantic
#   configs; mask annealing starts 6520, 13040, 19560, 26080, ends 13040, 19560, 26080, 32600 (eomt_large_640.yaml:
#   13-14);
# - classes: 150 (datasets/ade20k_panoptic.py:131), the 50 stuff ones listed at eomt_large_640.yaml:24, the 100 things
#   the others (INSTANCE_MAPPING, datasets/ade20k_panoptic.py:19-120); here in mmdet's ADE20K panoptic order, things
#   first (beit_mm/data/ade20k_panoptic.py);
# - colour jitter on (color_jitter_enabled=True, datasets/ade20k_panoptic.py:132, not set by the yaml): brightness
#   32/255, contrast 0.5, saturation 0.5, hue 18/360, each with probability 0.5 (transforms.py:23-26, 44-80).
#
# Differences from the official run: as the COCO panoptic config's header (backbone, precision, compile, padding colour,
# no re-draw of a crop that lost every segment), plus: colour jitter by mmdet's PhotoMetricDistortion (as the ADE20K
# semantic configs' mmseg one: brightness added, not multiplied); images whose semantic PNG holds one value are kept
# (the official drops them, datasets/dataset.py:135-160); where a stuff region of the semantic PNG and an instance
# overlap, the stuff target leaves out the instance's pixels (the official's masks overlap there).
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/datasets/ade20k-panoptic.py']
data_root = 'data/ade/ADEChallengeData2016/'
img_size = 640
pretrained = 'checkpoints/eomt-large-640_coco-panoptic_no-class-head.pth'
load_from = pretrained  # a whole EoMT but its class head (tools/train.py checks that it holds every other weight)
model = dict(
    backbone=dict(init_cfg=None),  # every backbone weight comes from load_from
    num_classes=150,
    num_things_classes=100,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadADE20KPanopticAnnotations'),
    dict(type='mmdet.PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5),
         saturation_range=(0.5, 1.5), hue_delta=9),  # hue in OpenCV's 0..180 units: 18 degrees
    dict(type='mmdet.RandomFlip', prob=0.5),
    dict(type='mmdet.RandomResize', scale=(img_size, img_size), ratio_range=(0.1, 2.0), keep_ratio=True,
         resize_type='mmdet.Resize'),
    dict(type='mmdet.RandomCrop', crop_size=(img_size, img_size), crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.Resize', scale=(img_size, img_size), keep_ratio=True),
    dict(type='mmdet.PackDetInputs', meta_keys=_base_.ade20k_panoptic_meta_keys),
]
train_dataloader = dict(
    dataset=dict(_delete_=True, **_base_.ade20k_panoptic_train, data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(_delete_=True, **_base_.ade20k_panoptic_val, data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
iters_per_epoch = 1263
max_iters = 31 * iters_per_epoch  # 39153
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None))
