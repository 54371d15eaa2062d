# DALL-E-size dVAE tokenizer (4 groups x 2 blocks, 256 wide, 8192 codes; the released encoder.pkl's shape) trained on
# ImageNet-1k train images at 256x256 -> 32x32 codes, 8 GPUs x 64 = 512 images/step, 3M updates (DALL-E paper
# appendix A.2: batch 512, AdamW lr 1e-4 cosine-annealed to 1.25e-6 over 1.2M updates, wd 1e-5, tau 1 -> 1/16 over
# 150k updates, beta 0 -> 6.6 over 5k updates, logit-Laplace likelihood; verify against the paper before a long run).
#   bash tools/dist_train.sh configs/dvae/dvae_8xb64-3000k_in1k-256px.py 8
#   python -c "..extract_dvae_encoder.." -> checkpoints/dalle_encoder.pth  (see tools/run_chain.sh, stage 3)
# The exported encoder is a drop-in `tokenizer_checkpoint` for configs/beit/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py
# (use 112x112 tokenizer views there: the encoder downsamples 8x to the 14x14 patch grid).
# Precision and cuDNN: fp32, cudnn.benchmark off, unpinned: OpenAI released the dVAE's inference modules only
# (openai/DALL-E dall_e/; its encoder runs fp16 convs on CUDA, utils.py:32-36), no training code to follow.
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
# cosine to 1.25e-6 over the first 1.2M updates; the lr then stays at 1.25e-6 (a scheduler past its end keeps its
# last value)
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
               dist_cfg=dict(backend='nccl'))  # tools/train.py uses gloo without CUDA
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
