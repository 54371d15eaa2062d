# BEiT-B/16 masked image modeling on ImageNet-1k, 800 epochs, 8 GPUs x 256 = 2048 images/step, bf16 AMP (BEiT paper
# recipe, unilm beit/README: 83.2 top-1 after 100 epochs of fine-tuning). The tokenizer is DALL-E's dVAE encoder:
#   python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl checkpoints/dalle_encoder.pth
# Train:  bash tools/dist_train.sh configs/beit/beit-base-p16_8xb256-amp-coslr-800e_in1k.py 8
# The checkpoints (work_dirs/<this config>/epoch_N.pth) keep the backbone under `backbone.`; the fine-tuning configs
# beit-base-p16_mim-pre_8xb128-coslr-100e_in1k.py and beit-base_mim-pre_upernet_8xb2-160k_ade20k-512x512.py load them.
_base_ = ['../_base_/datasets/imagenet_mim.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='beit_mm.BEiTPretrain',
    data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[127.5, 127.5, 127.5],
                           std=[127.5, 127.5, 127.5], to_rgb=True),
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
        init_mode='pretrain'),  # unilm modeling_pretrain.py init (trunc normal cut at +-0.02, patch embed included)
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
    # fp32 tokenizer outside autocast, as unilm (engine_for_pretraining.py) computes the targets
    target_generator=dict(type='beit_mm.DALLEEncoder',
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3  # for 2048 images per step
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='bfloat16',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    # layer_decay_rate=1.0: no lr decay, only unilm's weight-decay exemptions (norms, biases, tokens, gammas,
    # q/v biases, relative position bias), matched by module type and name component
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, bias_decay_mult=0.0, norm_decay_mult=0.0))
warmup_epochs = 10
max_epochs = 800
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / base_lr, by_epoch=True, begin=0, end=warmup_epochs,
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
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))  # tools/train.py uses gloo without CUDA
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
