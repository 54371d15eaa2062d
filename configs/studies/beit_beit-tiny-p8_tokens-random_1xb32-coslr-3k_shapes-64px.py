# MIM study, random-masking arm: as beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py, but the mask is drawn
# uniformly at random with the same count (40% of the 8x8 grid) instead of blockwise (the BEiT paper's ablation,
# Table 4). Only the mask generator of the pipeline differs.
_base_ = ['./beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py']
img_size = 64
patch_size = 8
mask_ratio = 0.4
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=img_size, tokenizer_size=img_size, scale=(0.5, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', backend='pillow'),
    dict(type='beit_mm.RandomMaskGenerator', input_size=img_size // patch_size, mask_ratio=mask_ratio),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
