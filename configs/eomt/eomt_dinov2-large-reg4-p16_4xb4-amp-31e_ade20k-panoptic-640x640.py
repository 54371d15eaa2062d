# EoMT-L (DINOv2-style ViT-L/16 with 4 registers) for ADE20K panoptic 640x640, fine-tuned from the COCO panoptic EoMT-L.
# Published: 50.6 PQ (ADE20K panoptic val; tue-mps/eomt model_zoo/dinov2.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov2/ade20k/panoptic/eomt_large_640.yaml.
#   python tools/convert_checkpoint.py --model eomt --source hf --drop-class-head model.safetensors \
#       checkpoints/eomt-large-640_coco-panoptic_no-class-head.pth
#   python tools/convert_checkpoint.py --model eomt --source hf --class-order ade20k-panoptic model.safetensors \
#       checkpoints/eomt-large-640_ade20k-panoptic.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/datasets/ade20k-panoptic.py']
data_root = 'data/ade/ADEChallengeData2016/'
img_size = 640
pretrained = 'checkpoints/eomt-large-640_coco-panoptic_no-class-head.pth'
load_from = pretrained
model = dict(
    backbone=dict(init_cfg=None),
    num_classes=150,
    num_things_classes=100,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadADE20KPanopticAnnotations'),
    dict(type='mmdet.PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5),
         saturation_range=(0.5, 1.5), hue_delta=9),
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
max_iters = 31 * iters_per_epoch
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None))
