# Mask2Former on ViT-Adapter-L over BEiT-L, Cityscapes 896x896, 16 images a step, 80k iterations, from ViT-Adapter's
# Mapillary Vistas-trained segmentor (mask2former_beit_adapter_large_896_80k_mapillary.zip, ViT-Adapter release
# v0.2.3). Published: 84.9 mIoU single scale, 85.8 multi-scale on Cityscapes val (85.2 multi-scale on test), 571M
# parameters (czczup/ViT-Adapter segmentation/configs/cityscapes/README.md:15, 23).
#
# The start: ViT-Adapter loads the whole Mapillary segmentor (C:11-12 load_from; README.md:17 "--cfg-options
# load_from=<pretrained_path>"). beit_mm's converter (docs/checkpoints.md, ViT-Adapter segmentors) converts its
# backbone, the BEiT-L adapter, not its head (ViT-Adapter's mmdet 2.x Mask2Former port, whose names do not map onto
# mmseg 1.x's Mask2FormerHead; a Mask2Former file is refused with --keep-head):
#   unzip mask2former_beit_adapter_large_896_80k_mapillary.zip
#   python tools/convert_checkpoint.py --model vit_adapter --source official \
#       mask2former_beit_adapter_large_896_80k_mapillary.pth checkpoints/beit-adapter-large_m2f-mapillary_backbone.pth
# So here the backbone, adapter included, starts from that file (backbone.init_cfg, every weight loaded) and the
# head at its init, where the published run also started the head from Mapillary's (but its 65-class embedding,
# whose shape differs): load_from stays None. This is the one known difference from the published start.
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), C = configs/cityscapes/
# mask2former_beit_adapter_large_896_80k_cityscapes_ss.py, D = configs/_base_/datasets/cityscapes_896x896.py: the
# COCO-Stuff-164k BEiT-L Mask2Former file (mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py here; C's
# model lines are its lines shifted by one, C:13-105) with 100 queries, 19 classes, Cityscapes data and evaluation
# every 1000 iterations. Pinned value by value in tests/configs/test_dataset_configs.py.
# Batch: ViT-Adapter trains 16 GPUs x 1 image (C:132, README.md:15 "16x1"); here 8 GPUs x 2 images, the same 16.
_base_ = ['./mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py']
crop_size = (896, 896)  # C:8
scale = (2048, 1024)  # C:113, D:21
num_classes = 19  # _base_/models/mask2former_beit_cityscapes.py:2-4 (8 things + 11 stuff)
data_root = 'data/cityscapes/'  # configs/_base_/datasets/cityscapes.py (ViT-Adapter _base_/datasets/cityscapes.py:3)
pretrained = 'checkpoints/beit-adapter-large_m2f-mapillary_backbone.pth'  # C:11-12, converted as above
load_from = None
model = dict(
    backbone=dict(init_cfg=dict(_delete_=True, type='Pretrained', checkpoint=pretrained)),  # the adapter too
    decode_head=dict(
        num_queries=100,  # C:40
        num_classes=num_classes,
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),  # mask2former_beit_cityscapes.py:98
    test_cfg=dict(crop_size=crop_size, stride=(512, 512)))  # C:105
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),  # C:112
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),  # C:113
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # C:114
    dict(type='RandomFlip', prob=0.5),  # C:115
    dict(type='PhotoMetricDistortion'),  # C:116
    dict(type='PackSegInputs'),  # C:118-121: the head makes the per-class masks (mmseg Mask2FormerHead)
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),  # D:21, 25; no ResizeToMultiple in D:17-31
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
# Cityscapes' fine splits (the base config configs/_base_/datasets/cityscapes.py)
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
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),  # C:129-130
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=80000 + 1),  # C:131; schedule_80k.py:7
]
train_cfg = dict(val_interval=1000)  # C:136
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # C:135-136
