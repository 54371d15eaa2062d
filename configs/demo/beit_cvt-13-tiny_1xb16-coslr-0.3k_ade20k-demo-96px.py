# CPU demo of CvT masked image modeling: a tiny CvT on 96x96 crops of the synthetic demo images, 300 iterations at
# batch 16 (a few minutes on a laptop CPU), targets from a small DALL-E-architecture dVAE encoder.
#   python tools/make_demo_data.py --root data/ade_demo          # the images (labels unused)
#   python tools/train.py configs/demo/beit_cvt-13-tiny_1xb16-coslr-0.3k_ade20k-demo-96px.py \
#       --cfg-options model.target_generator.init_cfg.checkpoint=PATH   (or edit `tokenizer_checkpoint`)
# `tokenizer` must describe the dVAE encoder whose weights `tokenizer_checkpoint` holds (a beit_mm.DALLEEncoder state
# dict); its 48x48 view is downsampled 8x to the 6x6 patch grid of the 96x96 backbone view, which is the stage-2 grid
# of the CvT (stage-0 24x24 tokens, mask upsampled x4).
_base_ = ['../cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder_demo.pth'
tokenizer = dict(group_count=4, n_hid=32, n_blk_per_group=1, vocab_size=512)
data_root = 'data/ade_demo'
img_size = 96
embed_dims = [32, 64, 96]
max_iters = 300

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=img_size, tokenizer_size=img_size // 2, scale=(0.2, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', backend='pillow'),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=img_size // 16, mask_ratio=0.4, min_num_patches=4),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    _delete_=True,
    batch_size=16,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='images/training', with_label=False,
                 pipeline=train_pipeline))

model = dict(
    backbone=dict(arch=dict(_delete_=True, embed_dims=embed_dims, depths=[1, 1, 2], num_heads=[1, 2, 3]),
                  drop_path_rate=0.0),
    head=dict(embed_dims=embed_dims[-1], vocab_size=tokenizer['vocab_size']),
    target_generator=dict(**tokenizer, init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1e-3
optim_wrapper = dict(type='OptimWrapper', _delete_=True, optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999),
                                                                        weight_decay=0.05),
                     clip_grad=dict(max_norm=3.0), constructor='beit_mm.LayerDecayOptimWrapperConstructor',
                     paramwise_cfg=dict(layer_decay_rate=1.0, bias_decay_mult=0.0, norm_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=10),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=100, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0, deterministic=True)
