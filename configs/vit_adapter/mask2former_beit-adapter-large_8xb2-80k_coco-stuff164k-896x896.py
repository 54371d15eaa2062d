# Mask2Former on ViT-Adapter-L over BEiT-L, COCO-Stuff-164k 896x896, 16 images a step, 80k iterations, from the
# ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at their
# init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 51.7 mIoU single scale, 52.0 multi-scale, 571M parameters (czczup/ViT-Adapter segmentation/configs/
# coco_stuff164k/README.md:14). The released segmentor's backbone (mask2former_beit_adapter_large_896_80k_
# cocostuff164k.zip, unzipped) converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
# (its head is ViT-Adapter's mmdet 2.x port, whose names differ from mmseg 1.x's Mask2FormerHead: not converted).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), S = configs/coco_stuff164k/
# mask2former_beit_adapter_large_896_80k_cocostuff164k_ss.py: the BEiT-L Mask2Former file of COCO-Stuff-10k
# (mask2former_beit-adapter-large_8xb2-40k_coco-stuff10k-512x512.py here, whose lines are S's shifted by one after
# S:12) at 896 with 200 queries, on COCO-Stuff-164k, 80k iterations. So this config inherits that one (model,
# optimizer, head) and sets what S changes. Pinned value by value in tests/configs/test_dataset_configs.py.
# Batch: ViT-Adapter trains 16 GPUs x 1 image (S:147, README.md:14 "16x1"); here 8 GPUs x 2 images, the same 16 a
# step (the only difference: SyncBN of the adapter's spatial prior module sees 2 images a GPU).
_base_ = ['./mask2former_beit-adapter-large_8xb2-40k_coco-stuff10k-512x512.py']
crop_size = (896, 896)  # S:8
scale = (3584, 896)  # S:112, 126
data_root = 'data/coco_stuff164k'  # configs/_base_/datasets/coco-stuff164k.py (ViT-Adapter S:4)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=896),  # S:16
    decode_head=dict(num_queries=200),  # S:39
    test_cfg=dict(crop_size=crop_size, stride=(512, 512)))  # S:104
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),  # S:111: no reduce_zero_label (0 is "person")
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),  # S:112
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # S:113
    dict(type='RandomFlip', prob=0.5),  # S:114
    dict(type='PhotoMetricDistortion'),  # S:115
    dict(type='PackSegInputs'),  # S:117-120: the head makes the per-class masks (mmseg Mask2FormerHead)
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),  # S:126, 130
    dict(type='ResizeToMultiple', size_divisor=32),  # S:131
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
# COCO-Stuff-164k's splits (the base config configs/_base_/datasets/coco-stuff164k.py)
train_dataloader = dict(
    batch_size=2,  # x 8 GPUs = S:147's 1 x 16
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
max_iters = 80000  # schedule_80k.py:7
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),  # S:144-145
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),  # S:146
]
train_cfg = dict(max_iters=max_iters, val_interval=8000)  # S:153
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))  # S:152-153
