# BEiT-B/16 masked image modeling on ImageNet-1k, 800 epochs, 8 GPUs x 256 = 2048 images/step, AMP (BEiT paper
# recipe, unilm beit/README: 83.2 top-1 after 100 epochs of fine-tuning).
# Reference: unilm beit/README.md "Pre-training BEiT-base on ImageNet-1k" (16 GPUs x 128, --lr 1.5e-3 --warmup_epochs
# 10 --epochs 800 --clip_grad 3.0 --imagenet_default_mean_and_std); run_beit_pretraining.py create_optimizer(args,
# model) -> optim_factory.py get_parameter_groups (line 65: no weight decay on 1-D parameters, biases and
# no_weight_decay() = {pos_embed, cls_token}; mask_token and the shared relative position table decay, no layer
# decay); utils.py cosine_scheduler (per step: linear warmup from 0, cosine to --min_lr 1e-5).
# The tokenizer is DALL-E's dVAE encoder:
#   python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl checkpoints/dalle_encoder.pth
# Train:  bash tools/dist_train.sh configs/beit/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py 8
# The checkpoints (work_dirs/<this config>/epoch_N.pth) keep the backbone under `backbone.`; the fine-tuning configs
# beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py and beit-base_beit-pre_upernet_8xb2-160k_ade20k-512x512.py load them.
_base_ = ['../_base_/datasets/imagenet_mim.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='beit_mm.BEiTPretrain',
    # --imagenet_default_mean_and_std (unilm README: "enable this for ImageNet-1k pre-training")
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
        init_mode='pretrain'),  # unilm modeling_pretrain.py init (trunc normal cut at +-0.02, patch embed included)
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
    # The ids in bf16 (input conv and groups; the output conv in fp32): unilm tokenizes with the released dall_e
    # encoder (beit/modeling_discrete_vae.py lines 203-227), whose convs run in fp16 on CUDA (dall-e 0.1
    # dall_e/utils.py lines 32-36; not the output conv, encoder.py line 81). bf16 ids agree with fp32 on 99.5% of the
    # tokens (real-size encoder, random weights: docs/studies/tokenizer-precision.md), above the 99% the configs ask.
    target_generator=dict(type='beit_mm.DALLEEncoder', autocast_dtype='bfloat16',
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3  # for 2048 images per step
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    # layer_decay_rate=1.0: no lr decay; unilm get_parameter_groups' weight-decay rule with skip_list
    # no_weight_decay() = ('cls_token', 'pos_embed') (the 'unilm' rule's default no_decay_names)
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, weight_decay_rule='unilm'))
warmup_epochs = 10
max_epochs = 800
# unilm cosine_scheduler warms up with np.linspace(0, lr, W): lr * t / (W - 1) at step t, which LinearLR (T = end -
# begin - 1) gives for start_factor -> 0; MMEngine's chained LinearLR divides by T * start_factor at its first step, so
# 1e-9 stands for 0 (lr 1.5e-12 at step 0).
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
# Warn at start when processes x batch x accumulation differs from auto_scale_lr.base_batch_size.
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook')]
# cudnn.benchmark = True: unilm run_beit_pretraining.py line 163
env_cfg = dict(cudnn_benchmark=True, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))  # tools/train.py uses gloo without CUDA
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
