# ImageNet-1k classification for BEiT fine-tuning (unilm beit/datasets.py build_transform): RandomResizedCrop 224
# bicubic, h-flip, RandAugment rand-m9-mstd0.5-inc1, RandomErasing 0.25; eval resizes the short side to 256 and
# centre-crops 224. Layout: data/imagenet/{train,val}/ with meta/{train,val}.txt.
data_root = 'data/imagenet/'
bgr_mean = [103.53, 116.28, 123.675]
bgr_std = [57.375, 57.12, 58.395]
rand_augment = dict(policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9, magnitude_std=0.5,
                    hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic'))
random_erasing = dict(erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3, fill_color=bgr_mean,
                      fill_std=bgr_std)
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', **rand_augment),
    dict(type='RandomErasing', **random_erasing),
    dict(type='PackInputs'),
]
train_pipeline = [
    dict(type='beit_mm.DecodeRandomResizedCrop', scale=224, interpolation='bicubic', flip_prob=0.5),
    dict(type='beit_mm.SampleRandAugment', **rand_augment),
    dict(type='beit_mm.SampleRandomErasing', **random_erasing),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip',
                                       'flip_direction', 'rand_augment', 'random_erasing')),
]
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
    batch_size=128,
    num_workers=13,
    pin_memory=True,
    persistent_workers=True,
    drop_last=True,
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
