# BEiT v2 MIM on ImageNet, the train pipeline of mmpretrain's transforms on decoded images, as unilm's.
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=224, tokenizer_size=224, scale=(0.2, 1.0),
         interpolation='bicubic', tokenizer_interpolation='bicubic', backend='pillow'),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3, exact_count=True),
    dict(type='PackInputs'),
]
