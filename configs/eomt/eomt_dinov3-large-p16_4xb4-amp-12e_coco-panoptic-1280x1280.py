# EoMT-L on DINOv3 ViT-L/16 for COCO panoptic segmentation at 1280x1280: the official
# configs/dinov3/coco/panoptic/eomt_large_1280.yaml (github.com/tue-mps/eomt @ 7bd19dd) as
# eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-640x640.py at 1280 (jitter target, crop, test resize and pad).
# That yaml, unlike the DINOv2 one (configs/dinov2/coco/panoptic/eomt_large_1280.yaml:24), sets no img_size, so run
# as written it trains at the data module's 640; the model zoo gives the published model's input as 1280x1280
# (model_zoo/dinov3.md:43), which this config follows.
# Published: 58.9 PQ (COCO panoptic val2017; tue-mps/eomt model_zoo/dinov3.md:41-47; weights on HF:
# tue-mps/coco_panoptic_eomt_large_1280_dinov3, deltas to the DINOv3 weights).
# Start: checkpoints/dinov3-large.pth (RoPE: the same file at every size):
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
_base_ = ['./eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-640x640.py']
img_size = 1280
model = dict(data_preprocessor=dict(pad_size_divisor=img_size), backbone=dict(img_size=img_size))
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='beit_mm.LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
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
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path', 'segments_info')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
