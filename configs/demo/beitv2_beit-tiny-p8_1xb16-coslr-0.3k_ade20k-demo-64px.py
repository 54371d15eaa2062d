# CPU demo of BEiT v2 masked image modeling: the recipe's model (configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-
# 1600e_in1k.py: cls-token pretraining blocks reading block `early_layers`, one lm head shared by both token sets,
# shared relative position bias, layer scale 0.1, VQ-KD ids of the raw 0..255 view as targets, exactly
# `num_masking_patches` masked) at tiny size on 64x64 crops of the synthetic demo images, 300 iterations at batch 16.
# The tokenizer is a VQ-KD of the study's architecture (patch 8 on 64 px: one code per backbone patch, 256 codes),
# trained by configs/studies/vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py:
#   python tools/make_demo_data.py --root data/ade_demo          # the images (labels unused)
#   python tools/train.py configs/demo/beitv2_beit-tiny-p8_1xb16-coslr-0.3k_ade20k-demo-64px.py \
#       --cfg-options model.target_generator.init_cfg.checkpoint=VQKD.pth   (or edit `tokenizer_checkpoint`)
_base_ = ['../beit2/beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py']
tokenizer_checkpoint = 'checkpoints/vqkd_demo.pth'
tokenizer = dict(
    encoder=dict(embed_dims=128, num_layers=4, num_heads=4, mlp_ratio=4.0),
    decoder=dict(embed_dims=128, num_layers=1, num_heads=4, mlp_ratio=4.0),
    img_size=64, patch_size=8, num_codes=256, code_dims=32, out_dims=128)
data_root = 'data/ade_demo'
img_size = 64
patch_size = 8
embed_dims = 96
max_iters = 300

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4, hue=0.),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='beit_mm.TwoViewRandomResizedCrop', size=img_size, tokenizer_size=img_size, scale=(0.2, 1.0),
         interpolation='bicubic', tokenizer_interpolation='bicubic', backend='pillow'),
    dict(type='beit_mm.BEiTMaskGenerator', input_size=img_size // patch_size, num_masking_patches=24,
         min_num_patches=4, max_num_patches=None, min_aspect=0.3, exact_count=True),
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
    backbone=dict(arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
                  img_size=img_size, patch_size=patch_size, drop_path_rate=0.0,
                  cls_pretrain=dict(early_layers=3, head_layers=1)),
    head=dict(embed_dims=embed_dims, vocab_size=tokenizer['num_codes']),
    target_generator=dict(arch=tokenizer, init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1e-3
optim_wrapper = dict(optimizer=dict(lr=base_lr))
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
