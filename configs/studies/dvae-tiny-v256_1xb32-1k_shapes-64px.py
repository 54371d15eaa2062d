# MIM study, stage 1: the tokenizer. A small DALL-E-architecture dVAE (256 codes) on the unlabeled pool's 64x64 images
# -> 8x8 codes, 1 process x 32 images, 1k iterations, DALL-E's recipe with its annealing spread over the short run, plus
# beit_mm's codebook-usage term (without it the hard codes collapse on these flat-background images).
#   python tools/train.py configs/studies/dvae-tiny-v256_1xb32-1k_shapes-64px.py --cfg-options \
#       train_dataloader.dataset.data_root=data/shapes_unlabeled
#   python tools/convert_checkpoint.py --model dalle --source dvae work_dirs/<this config>/iter_1000.pth tokenizer.pth
_base_ = ['../dvae/dvae_8xb64-3000k_in1k-256px.py']
data_root = 'data/shapes_unlabeled'
img_size = 64
max_iters = 1000
tokenizer = dict(group_count=4, n_hid=32, n_blk_per_group=1, vocab_size=256)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.5, 1.0), backend='pillow',
         interpolation='lanczos'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=32,
    num_workers=2,
    dataset=dict(data_root=data_root, data_prefix='images/training', pipeline=train_pipeline))
model = dict(_delete_=True, type='beit_mm.DVAE', **tokenizer, decoder_n_init=64, rec_loss='logit_laplace',
             kl_weight=6.6, usage_weight=1.0)
heldout_folder = 'data/shapes/images/validation'
custom_hooks = [
    dict(type='beit_mm.DVAEScheduleHook', temperature=(1.0, 1 / 16), temperature_iters=max_iters * 6 // 10,
         kl_weight=(0.0, 6.6), kl_weight_iters=max_iters // 10),
    dict(type='beit_mm.TokenizerEvalHook', folder=heldout_folder, img_size=img_size, num_images=256,
         interval=max_iters // 4),
]
base_lr = 1e-3
optim_wrapper = dict(optimizer=dict(lr=base_lr), clip_grad=dict(max_norm=10.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=100, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=100),
    checkpoint=dict(interval=250, max_keep_ckpts=1))
env_cfg = dict(dist_cfg=dict(backend='gloo'))
