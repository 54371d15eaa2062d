# BEiT v2 BEiT-B/16 masked image modeling on ImageNet-1k with VQ-KD (CLIP) visual tokens and cls-token pretraining,
# 1600 epochs, 8 GPUs x 256 = 2048 images/step, mixed precision. Published downstream: 85.5 top-1 after 100 epochs of
# ImageNet fine-tuning, 53.1 mIoU ADE20K UPerNet 512 (unilm beit2/README.md; the fine-tuning configs are
# beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py and beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py).
# Reference: unilm beit2/PRETRAINING.md "Base-size" (16 GPUs x 128; --model beit_base_patch16_224_8k_vocab_cls_pt
# --shared_lm_head True --early_layers 9 --head_layers 2 --num_mask_patches 75 --second_input_size 224
# --second_interpolation bicubic --min_crop_scale 0.2 --tokenizer_model vqkd_encoder_base_decoder_3x768x12_clip
# --lr 1.5e-3 --warmup_epochs 10 --clip_grad 3.0 --drop_path 0.1 --layer_scale_init_value 0.1
# --imagenet_default_mean_and_std --opt_betas 0.9 0.999 --opt_eps 1e-8 --epochs 1600; "--opt_betas: 0.98 for 300
# epochs and 0.999 for 1600 epochs", "--drop_path: 0. for 300 epochs and 0.1 for 1600 epochs");
# run_beitv2_pretraining.py defaults (--weight_decay 0.05 constant, --min_lr 1e-5, shared relative position bias,
# no absolute position embedding); optim_factory.py get_parameter_groups line 73 (no weight decay on 1-D parameters,
# biases and no_weight_decay() = {pos_embed, cls_token}; no layer decay); utils.py cosine_scheduler (per step: linear
# warmup from 0, cosine to min_lr); engine_for_pretraining.py lines 54-66 (loss = CE of the final tokens + CE of the
# cls-pretraining tokens, both through the shared lm_head, at the masked positions).
# The tokenizer is unilm's VQ-KD vqkd_encoder_base_decoder_3x768x12_clip-d5036aa7.pth, converted with
#   python tools/convert_checkpoint.py --model vqkd --source unilm vqkd_encoder_base_decoder_3x768x12_clip-d5036aa7.pth \
#       checkpoints/vqkd_base_decoder_3x_clip.pth
# Train:  bash tools/dist_train.sh configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py 8
# The checkpoints keep the backbone under `backbone.` (with the cls-pretraining blocks `backbone.cls_pt_layers.*`,
# which fine-tuning does not use).
_base_ = ['../_base_/datasets/imagenet_mim_beitv2.py']
tokenizer_checkpoint = 'checkpoints/vqkd_base_decoder_3x_clip.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

drop_path_rate = 0.1  # 0 for 300 epochs, 0.1 for 1600 (PRETRAINING.md)
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
        init_mode='pretrain'),  # unilm modeling_pretrain.py init (trunc normal cut at +-0.02, patch embed included)
    # shared lm_head over the 8192 VQ-KD codes for both token sets (--shared_lm_head True)
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=768, vocab_size=8192),
    # The ids in fp32 (beit_mm's choice, measured): unilm engine_for_pretraining.py lines 54-56 compute them under the
    # step's fp16 autocast (the encoder and the quantizer's distances; not the encode task layer, modeling_vqkd.py
    # lines 155-156). Under bf16 the real-size encoder's ids agree with fp32 on 93.5% of the tokens (random weights and
    # a k-means codebook: docs/studies/tokenizer-precision.md), below the 99% the configs ask, so no autocast_dtype.
    # Tokenizing needs no decoder: with_decoder=False (the file's decoder weights are dropped on load).
    target_generator=dict(type='beit_mm.VQKD', with_decoder=False,
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)))

base_lr = 1.5e-3  # for 2048 images per step
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=3.0),
    # layer_decay_rate=1.0: no lr decay; unilm get_parameter_groups' weight-decay rule with skip_list
    # no_weight_decay() = ('cls_token', 'pos_embed') (the 'unilm' rule's default no_decay_names)
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0, weight_decay_rule='unilm'))
warmup_epochs = 10
max_epochs = 1600
# unilm cosine_scheduler warms up with np.linspace(0, lr, W); 1e-9 stands for 0 (see configs/beit/*800e_in1k.py)
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
    checkpoint=dict(type='CheckpointHook', interval=20, max_keep_ckpts=3),  # --save_ckpt_freq 20
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False))
# Warn at start when processes x batch x accumulation differs from auto_scale_lr.base_batch_size.
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook')]
# cudnn.benchmark = True: unilm beit2/run_beitv2_pretraining.py line 213
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
