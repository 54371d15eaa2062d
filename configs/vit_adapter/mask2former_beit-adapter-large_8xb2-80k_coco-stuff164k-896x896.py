# Mask2Former on ViT-Adapter-L over BEiT-L, COCO-Stuff-164k 896x896, 16 images a step, 80k iterations, from unilm
# beit_large_patch16_224_pt22k_ft22k. Published: 51.7 mIoU single scale, 52.0 multi-scale (czczup/ViT-Adapter
# segmentation/configs/coco_stuff164k/README.md).
_base_ = ['./mask2former_beit-adapter-large_8xb2-40k_coco-stuff10k-512x512.py']
crop_size = (896, 896)
scale = (3584, 896)
data_root = 'data/coco_stuff164k'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=896),
    decode_head=dict(num_queries=200),
    test_cfg=dict(crop_size=crop_size, stride=(512, 512)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2,
    dataset=dict(
        _delete_=True,
        type='COCOStuffDataset',
        data_root=data_root,
        data_prefix=dict(img_path='images/train2017', seg_map_path='annotations/train2017'),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='COCOStuffDataset',
        data_root=data_root,
        data_prefix=dict(img_path='images/val2017', seg_map_path='annotations/val2017'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
max_iters = 80000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(max_iters=max_iters, val_interval=8000)
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))
