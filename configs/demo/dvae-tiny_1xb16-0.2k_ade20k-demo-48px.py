# CPU demo: the MIM demo's tokenizer (DALL-E encoder architecture, 512 codes) trained as a dVAE on 48x48 crops of the
# generated ADE20K-layout images, 1 process x 16 images, 200 iterations, DALL-E's annealing shortened to the run.
#   python tools/train.py configs/demo/dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py
#   then export the encoder for the MIM demo: see tools/run_chain.sh (beit_mm.converters.dvae.extract_dvae_encoder)
_base_ = ['../dvae/dvae_8xb64-3000k_in1k-256px.py']
data_root = 'data/ade_demo'
img_size = 48
max_iters = 200
tokenizer = dict(group_count=4, n_hid=32, n_blk_per_group=1, vocab_size=512)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.2, 1.0), backend='pillow',
         interpolation='lanczos'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=16,
    num_workers=2,
    dataset=dict(data_root=data_root, data_prefix='images/training', pipeline=train_pipeline))
model = dict(_delete_=True, type='beit_mm.DVAE', **tokenizer, decoder_n_init=64, rec_loss='logit_laplace',
             kl_weight=6.6, usage_weight=1.0)
custom_hooks = [
    dict(type='beit_mm.DVAEScheduleHook', temperature=(1.0, 1 / 16), temperature_iters=150, kl_weight=(0.0, 6.6),
         kl_weight_iters=20),
    dict(type='beit_mm.TokenizerEvalHook', folder=None, img_size=img_size, num_images=40, interval=max_iters),
]
base_lr = 2e-3
optim_wrapper = dict(optimizer=dict(lr=base_lr), clip_grad=dict(max_norm=10.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=10),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=10, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=1))
env_cfg = dict(dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
