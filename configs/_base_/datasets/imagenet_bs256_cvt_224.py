# ImageNet-1k for CvT training from scratch at 224 (microsoft/CvT experiments/imagenet/cvt/cvt-13-224x224.yaml):
# RandomResizedCrop 224 (scale 0.08-1, bicubic), h-flip, RandAugment rand-m9-mstd0.5-inc1 (as mmpretrain's
# deit/swin configs write it), random erasing 0.25 (timm 'pixel' mode = mmpretrain 'rand'); no colour jitter (timm
# drops it when RandAugment is on). Test: short side 256 (224 / 0.875), centre crop 224, bicubic. 256 images per GPU.
#
# Layouts (mmpretrain's ImageNet dataset reads both):
#   folder layout:          data/imagenet/{train,val}/<wnid>/*.JPEG (val sorted into wnid folders, e.g. by the usual
#                           valprep.sh); used when there is no meta/<split>.txt.
#   annotation-file layout: data/imagenet/meta/{train,val}.txt with lines "<path under train/ or val/> <label>"; used
#                           whenever the file exists.
# Class order: label k must be the k-th wnid in sorted order. That is what the folder layout produces (mmpretrain's
# find_folders sorts), what OpenMMLab's meta/*.txt files use and what the official CvT checkpoints were trained with
# (REFERENCE.md section 6 item 14; CvT issue 14: 1% top-1 lost with another order). Annotation files written by other
# tools must use the same order.
dataset_type = 'ImageNet'
data_root = 'data/imagenet'
data_preprocessor = dict(
    type='beit_mm.AugmentClsDataPreprocessor',  # mmpretrain's ClsDataPreprocessor + the train pipeline's RandAugment
    num_classes=1000,
    mean=[123.675, 116.28, 103.53],  # ImageNet mean/std in 0-255 (CvT INPUT.MEAN/STD)
    std=[58.395, 57.12, 57.375],
    to_rgb=True)
bgr_mean = data_preprocessor['mean'][::-1]
bgr_std = data_preprocessor['std'][::-1]
# RandAugment rand-m9-mstd0.5-inc1 and random erasing, the same arguments in every train pipeline below.
rand_augment = dict(
    policies='timm_increasing',
    num_policies=2,
    total_level=10,
    magnitude_level=9,
    magnitude_std=0.5,
    hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic'))
random_erasing = dict(
    erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3, fill_color=bgr_mean, fill_std=bgr_std)
# The exact pipeline: the whole image decoded, then cropped; RandAugment and erasing on the worker.
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', **rand_augment),
    dict(type='RandomErasing', **random_erasing),
    dict(type='PackInputs'),
]
# The pipeline used: the same draws, the JPEG decoded at the smallest DCT scale that covers the crop, RandAugment's
# and RandomErasing's ops applied to the batch by beit_mm.AugmentClsDataPreprocessor on the device (as the BEiT
# fine-tuning base, imagenet_bs128_beit_ft.py). Back to the exact pipeline:
# train_dataloader = dict(dataset=dict(pipeline=train_pipeline_exact)).
train_pipeline = [
    dict(type='beit_mm.DecodeRandomResizedCrop', scale=224, interpolation='bicubic', flip_prob=0.5),
    dict(type='beit_mm.SampleRandAugment', **rand_augment),
    dict(type='beit_mm.SampleRandomErasing', **random_erasing),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip',
                                       'flip_direction', 'rand_augment', 'random_erasing')),
]
# The GPU-decode pipeline: the same draws; the worker only reads the file's bytes (a non-JPEG, greyscale, CMYK or
# EXIF-rotated file is decoded on the worker), and AugmentClsDataPreprocessor decodes the batch with torchvision's
# decode_jpeg on its device (nvjpeg on a GPU), crops, resizes (Pillow's bicubic on tensors) and flips there before the
# RandAugment ops (beit_mm/data/encoded_transforms.py; docs/performance.md#data-loading: what is exact). Select it with
# train_dataloader = dict(collate_fn=dict(type='pseudo_collate'), dataset=dict(pipeline=train_pipeline_gpu_decode))
train_pipeline_gpu_decode = [
    dict(type='beit_mm.EncodedRandomResizedCrop', scale=224, interpolation='bicubic', flip_prob=0.5),
    train_pipeline[1],
    train_pipeline[2],
    dict(type='PackInputs', meta_keys=train_pipeline[3]['meta_keys'] + ('crop_bbox', 'crop_resize')),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,
    num_workers=13,  # docs/performance.md#data-loading: 213-237 img/s per worker; a node has 13
    pin_memory=True,
    persistent_workers=True,
    drop_last=True,  # timm create_loader(is_training=True) drops the last incomplete batch: 625 steps per epoch
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='val', pipeline=test_pipeline))
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
