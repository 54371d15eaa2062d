# BEiT v2 MIM on ImageNet, the default train pipeline: each JPEG decoded at the smallest size its crop needs.
train_pipeline = [
    dict(type='beit_mm.SampleColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='beit_mm.DecodeTwoViewRandomResizedCrop', size=224, tokenizer_size=224, scale=(0.2, 1.0),
         interpolation='bicubic', tokenizer_interpolation='bicubic', flip_prob=0.5),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3, exact_count=True),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'flip', 'flip_direction',
                                       'color_jitter')),
]
