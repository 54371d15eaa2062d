# DALL-E-size dVAE tokenizer (8192 codes) trained on ImageNet-1k at 256x256, 8 GPUs x 64, 3M updates, fp32, after the
# DALL-E paper's appendix A.2. Published: none (OpenAI released no training code). Its exported encoder is a
# `tokenizer_checkpoint` for configs/beit/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py.
#   bash tools/dist_train.sh configs/dvae/dvae_8xb64-3000k_in1k-256px.py 8
#   python -c "..extract_dvae_encoder.." -> checkpoints/dalle_encoder.pth  (see tools/run_chain.sh, stage 3)
_base_ = ['../_base_/datasets/image_folder_dvae.py']
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

tokenizer = dict(group_count=4, n_hid=256, n_blk_per_group=2, vocab_size=8192)
max_iters = 3_000_000
model = dict(type='beit_mm.DVAE', **tokenizer, decoder_n_init=128, rec_loss='logit_laplace', kl_weight=6.6)
custom_hooks = [
    dict(type='beit_mm.DVAEScheduleHook', temperature=(1.0, 1 / 16), temperature_iters=150_000,
         kl_weight=(0.0, 6.6), kl_weight_iters=5_000)
]
base_lr = 1e-4
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8,
                                                         weight_decay=1e-5))
param_scheduler = [dict(type='CosineAnnealingLR', eta_min=1.25e-6, by_epoch=False, begin=0, end=1_200_000)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
auto_scale_lr = dict(enable=False, base_batch_size=512)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=10_000, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'))
log_processor = dict(by_epoch=False)
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
