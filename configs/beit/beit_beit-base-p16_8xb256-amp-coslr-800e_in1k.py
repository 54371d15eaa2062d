# BEiT-B/16 masked image modeling on ImageNet-1k with DALL-E tokens, 800 epochs, 8 GPUs x 256, mixed precision.
# Published downstream: 83.2 top-1 after 100 epochs of fine-tuning (BEiT paper; unilm beit/README.md).
# Source: microsoft/unilm@768a3c87 beit/README.md "Pre-training BEiT-base on ImageNet-1k" and run_beit_pretraining.py.
#   python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl checkpoints/dalle_encoder.pth
# The checkpoints (work_dirs/<this config>/epoch_N.pth) keep the backbone under `backbone.`.
_base_ = ['../_base_/datasets/imagenet_mim.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='beit_mm.BEiTPretrain',
    data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(
        type='beit_mm.BEiT',
        arch='base',
        img_size=224,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=False,
        use_shared_rel_pos_bias=True,
        layer_scale_init_value=0.1,
        drop_path_rate=0.1,
        out_indices=(-1, ),
        final_norm=True,
        with_mask_token=True,
        init_mode='pretrain'),
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
    target_generator=dict(type='beit_mm.DALLEEncoder', autocast_dtype='bfloat16',
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, weight_decay_rule='unilm'))
warmup_epochs = 10
max_epochs = 800
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
auto_scale_lr = dict(enable=False, base_batch_size=2048)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=10, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False))
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook')]
env_cfg = dict(cudnn_benchmark=True, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
compile = dict(scope='model', devices=['cuda'])
