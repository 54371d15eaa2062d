# ImageNet-1k without labels for BEiT masked image modeling (unilm beit/datasets.py DataAugmentationForBEiT):
# ColorJitter 0.4 and h-flip on the whole image, then ONE random resized crop (scale 0.08-1) resized to 224 (bicubic,
# backbone) and 112 (lanczos, DALL-E tokenizer), blockwise mask of 75 of the 14x14 patches.
# Layout: data/imagenet/train/<wnid>/*.JPEG (every image below train/ is used; labels are not read).
data_root = 'data/imagenet/'
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=224, tokenizer_size=112, scale=(0.08, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', backend='pillow'),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3),
    dict(type='PackInputs'),
]
train_pipeline = [
    dict(type='beit_mm.SampleColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='beit_mm.DecodeTwoViewRandomResizedCrop', size=224, tokenizer_size=112, scale=(0.08, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', flip_prob=0.5),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'flip', 'flip_direction',
                                       'color_jitter')),
]
train_pipeline_gpu_decode = [
    dict(type='beit_mm.SampleColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='beit_mm.EncodedTwoViewRandomResizedCrop', size=224, tokenizer_size=112, scale=(0.08, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', flip_prob=0.5),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'flip', 'flip_direction',
                                       'crop_bbox', 'color_jitter', 'two_view_resize')),
]
train_dataloader = dict(
    batch_size=256,
    num_workers=13,
    pin_memory=True,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='train', with_label=False,
                 pipeline=train_pipeline))
