# MIM study, stage 2 (the default arm): BEiT masked image modeling of a tiny BEiT (patch 8, 128 wide, 6 blocks) on the
# unlabeled pool's 64x64 images, blockwise mask of 26 of 64 patches, targets = ids of the study's dVAE tokenizer; 1
# process x 32 images, 3000 iterations. beit_mm.DenseProbeHook probes the frozen features every 500 iterations.
#   python tools/train.py configs/studies/beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py \
#       --cfg-options model.target_generator.init_cfg.checkpoint=TOKENIZER.pth \
#           train_dataloader.dataset.data_root=data/shapes_unlabeled
_base_ = ['../beit/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py']
tokenizer_checkpoint = 'work_dirs/mim_study/tokenizer.pth'
tokenizer = dict(group_count=4, n_hid=32, n_blk_per_group=1, vocab_size=256)
data_root = 'data/shapes_unlabeled'
img_size = 64
patch_size = 8
embed_dims = 128
mask_ratio = 0.4
max_iters = 3000
warmup_iters = 300

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=img_size, tokenizer_size=img_size, scale=(0.5, 1.0),
         interpolation='bicubic', tokenizer_interpolation='lanczos', backend='pillow'),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=img_size // patch_size, mask_ratio=mask_ratio,
         min_num_patches=4),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    _delete_=True,
    batch_size=32,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='images/training', with_label=False,
                 pipeline=train_pipeline))

model = dict(
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5]),
    backbone=dict(arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=6, num_heads=4, mlp_ratio=4.0),
                  img_size=img_size,
                  patch_size=patch_size,
                  drop_path_rate=0.0),
    head=dict(embed_dims=embed_dims, vocab_size=tokenizer['vocab_size']),
    target_generator=dict(**tokenizer, init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3
optim_wrapper = dict(type='OptimWrapper', _delete_=True, optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999),
                                                                        weight_decay=0.05),
                     clip_grad=dict(max_norm=3.0), constructor='beit_mm.LayerDecayOptimWrapperConstructor',
                     paramwise_cfg=dict(layer_decay_rate=1.0, bias_decay_mult=0.0, norm_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=500, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
labeled_root = 'data/shapes'
custom_hooks = [
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.DenseProbeHook', data_root=labeled_root, num_classes=7, img_size=img_size, interval=500,
         num_train=128, num_val=64),
]
env_cfg = dict(dist_cfg=dict(backend='gloo'))
