# Unlabelled images from a folder tree for dVAE tokenizer training (mmpretrain CustomDataset, with_label=False):
# RandomResizedCrop + horizontal flip, pixels packed as uint8 BGR; the DVAE's data preprocessor turns them into RGB
# in [0, 1]. Override data_root / data_prefix / img_size in the config that uses this file.
data_root = 'data/imagenet'
data_prefix = 'train'
img_size = 256
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.08, 1.0), backend='pillow',
         interpolation='lanczos'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix=data_prefix, with_label=False,
                 pipeline=train_pipeline))
