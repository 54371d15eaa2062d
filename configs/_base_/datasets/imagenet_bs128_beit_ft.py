# ImageNet-1k classification for BEiT fine-tuning (unilm beit/datasets.py build_transform, timm create_transform):
# RandomResizedCrop 224 bicubic, h-flip, RandAugment rand-m9-mstd0.5-inc1, RandomErasing 0.25 (per-pixel noise);
# eval: resize the short side to 256 (crop_pct 224/256), centre crop 224. Pixels normalized by mean = std = 127.5,
# so the timm fill values (mean colour 127, N(0, 1) noise in normalized space) are 127 and 127.5 +- 127.5 here.
# Layout: data/imagenet/{train,val}/ with meta/{train,val}.txt (mmpretrain ImageNet; train/<wnid>/ folders also work).
data_root = 'data/imagenet/'
bgr_mean = [127.5, 127.5, 127.5]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9,
         magnitude_std=0.5, hparams=dict(pad_val=[127, 127, 127], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=bgr_mean, fill_std=[127.5, 127.5, 127.5]),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type='ImageNet', data_root=data_root, split='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='ImageNet', data_root=data_root, split='val', pipeline=test_pipeline))
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
