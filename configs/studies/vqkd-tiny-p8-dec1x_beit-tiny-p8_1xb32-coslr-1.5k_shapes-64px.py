# MIM study: a tiny VQ-KD tokenizer (BEiT 4 x 128 encoder, patch 8, 256 codes x 32, 1-block decoder) distilled from the
# study's BEiT after masked image modeling, beit2/TOKENIZER.md's recipe at 1 process x 32 images, 1500 iterations.
# The teacher, e.g. the pixel-target arm, then the tokenizer:
#   python tools/train.py configs/studies/beit_beit-tiny-p8_pixels-blockwise_1xb32-coslr-3k_shapes-64px.py \
#       --work-dir work_dirs/vqkd_teacher --cfg-options train_dataloader.dataset.data_root=data/shapes_unlabeled
#   python tools/train.py configs/studies/vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py \
#       --cfg-options model.teacher.backbone.init_cfg.checkpoint=work_dirs/vqkd_teacher/iter_3000.pth
_base_ = ['../vqkd/vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py']
data_root = 'data/shapes_unlabeled'
heldout_folder = 'data/shapes/images/validation'
teacher_checkpoint = 'work_dirs/vqkd_teacher/iter_3000.pth'
img_size = 64
max_iters = 1500
warmup_iters = 150
base_lr = 1e-3
embed_dims = 128

model = dict(
    arch=dict(_delete_=True,
              encoder=dict(embed_dims=128, num_layers=4, num_heads=4, mlp_ratio=4.0),
              decoder=dict(embed_dims=128, num_layers=1, num_heads=4, mlp_ratio=4.0),
              img_size=img_size, patch_size=8, num_codes=256, code_dims=32, out_dims=embed_dims),
    autocast_dtype=None,
    dead_code_ratio=0.0,
    teacher=dict(
        _delete_=True,
        type='beit_mm.BackboneTeacher',
        backbone=dict(type='beit_mm.BEiT', arch=dict(embed_dims=embed_dims, num_layers=6, num_heads=4, mlp_ratio=4.0),
                      img_size=img_size, patch_size=8, use_abs_pos_emb=False, use_rel_pos_bias=False,
                      use_shared_rel_pos_bias=True, layer_scale_init_value=0.1, drop_path_rate=0.0, final_norm=True,
                      init_cfg=dict(type='Pretrained', checkpoint=teacher_checkpoint, prefix='backbone.')),
        mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.08, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=32,
    num_workers=2,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(data_root=data_root, data_prefix='images/training', pipeline=train_pipeline))
optim_wrapper = dict(optimizer=dict(lr=base_lr))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)
auto_scale_lr = dict(enable=False, base_batch_size=32)
custom_hooks = [
    dict(type='beit_mm.TokenizerEvalHook', folder=heldout_folder, img_size=img_size, num_images=256,
         interval=max_iters // 3),
]
default_hooks = dict(
    logger=dict(interval=100),
    checkpoint=dict(by_epoch=False, interval=500, max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
env_cfg = dict(dist_cfg=dict(backend='gloo'))
