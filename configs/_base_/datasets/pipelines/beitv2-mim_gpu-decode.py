# BEiT v2 MIM on ImageNet, the train pipeline that hands the encoded JPEG and its crop to the data preprocessor.
train_pipeline_gpu_decode = [
    dict(type='beit_mm.SampleColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='beit_mm.EncodedTwoViewRandomResizedCrop', size=224, tokenizer_size=224, scale=(0.2, 1.0),
         interpolation='bicubic', tokenizer_interpolation='bicubic', flip_prob=0.5),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=14, num_masking_patches=75, min_num_patches=16,
         max_num_patches=None, min_aspect=0.3, exact_count=True),
    dict(type='PackInputs', meta_keys=('sample_idx', 'img_path', 'ori_shape', 'img_shape', 'flip', 'flip_direction',
                                       'crop_bbox', 'color_jitter', 'two_view_resize')),
]
