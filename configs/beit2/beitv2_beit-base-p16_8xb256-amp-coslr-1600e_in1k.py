# BEiT v2 BEiT-B/16 masked image modeling on ImageNet-1k with VQ-KD (CLIP) tokens and cls-token pretraining, 1600
# epochs, 8 GPUs x 256, AMP. Published downstream: 85.5 top-1 (100 epochs of fine-tuning), 53.1 mIoU ADE20K UPerNet.
# Source: microsoft/unilm@768a3c87 beit2/PRETRAINING.md "Base-size" and run_beitv2_pretraining.py.
#   python tools/convert_checkpoint.py --model vqkd --source unilm vqkd_encoder_base_decoder_3x768x12_clip-d5036aa7.pth \
#       checkpoints/vqkd_base_decoder_3x_clip.pth
_base_ = ['../_base_/datasets/imagenet_mim_beitv2.py']
tokenizer_checkpoint = 'checkpoints/vqkd_base_decoder_3x_clip.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

drop_path_rate = 0.1
model = dict(
    type='beit_mm.BEiTPretrain',
    # --imagenet_default_mean_and_std for the backbone view; the tokenizer view goes to VQ-KD as 0..255 RGB
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
        drop_path_rate=drop_path_rate,
        out_indices=(-1, ),
        final_norm=True,
        with_mask_token=True,
        cls_pretrain=dict(early_layers=9, head_layers=2),
        init_mode='pretrain'),
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
    target_generator=dict(type='beit_mm.VQKD', with_decoder=False,
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, weight_decay_rule='unilm'))
warmup_epochs = 10
max_epochs = 1600
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
    checkpoint=dict(type='CheckpointHook', interval=20, max_keep_ckpts=3),
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
