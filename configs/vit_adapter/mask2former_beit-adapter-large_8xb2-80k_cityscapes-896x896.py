# Mask2Former on ViT-Adapter-L over BEiT-L, Cityscapes 896x896, 16 images a step, 80k iterations, from ViT-Adapter's
# Mapillary Vistas-trained segmentor (release v0.2.3). Published: 84.9 mIoU single scale, 85.8 multi-scale on val
# (czczup/ViT-Adapter segmentation/configs/cityscapes/README.md).
#   python tools/convert_checkpoint.py --model vit_adapter --source official \
#       mask2former_beit_adapter_large_896_80k_mapillary.pth checkpoints/beit-adapter-large_m2f-mapillary_backbone.pth
_base_ = ['./mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py']
crop_size = (896, 896)
scale = (2048, 1024)
num_classes = 19
data_root = 'data/cityscapes/'
pretrained = 'checkpoints/beit-adapter-large_m2f-mapillary_backbone.pth'
load_from = None
model = dict(
    backbone=dict(init_cfg=dict(_delete_=True, type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(
        num_queries=100,
        num_classes=num_classes,
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),
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
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='CityscapesDataset',
        data_root=data_root,
        data_prefix=dict(img_path='leftImg8bit/train', seg_map_path='gtFine/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='CityscapesDataset',
        data_root=data_root,
        data_prefix=dict(img_path='leftImg8bit/val', seg_map_path='gtFine/val'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=80000 + 1),
]
train_cfg = dict(val_interval=1000)
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))
