# ImageNet-1k fine-tuning of BEiT v2 BEiT-B/16 from its 1600-epoch VQ-KD pretraining, 100 epochs, 8 GPUs x 128 =
# 1024 images/step, AMP. Published: 85.5 top-1 (unilm beit2/README.md and get_started_for_image_classification.md,
# beitv2_base_patch16_224_pt1k -> beitv2_base_patch16_224_pt1k_ft1k).
# Reference: unilm beit2/get_started_for_image_classification.md "Fine-tuning BEiT v2 on ImageNet-1k" (8 GPUs x 128,
# --weight_decay 0.05 --warmup_epochs 20 --imagenet_default_mean_and_std; for pretrained (not intermediate
# fine-tuned) models: "--lr 5e-4", "--epochs 100", "--mixup 0.8", "--cutmix 1.0", "--layer_decay 0.6 for 1600
# epochs pretrained models", "--drop_path 0.2 for 1600 epochs pretrained models"); beit2/run_class_finetuning.py
# defaults (--min_lr 1e-6, --smoothing 0.1, --aa rand-m9-mstd0.5-inc1, --reprob 0.25 --remode pixel, --init_scale
# 0.001, use_mean_pooling, --layer_scale_init_value 0.1) and lines 500-533 (LayerDecayValueAssigner
# decay ** (L + 1 - i), skip list no_weight_decay() = {pos_embed, cls_token}; optim_factory.py line 73: no weight
# decay on 1-D parameters and biases); lines 372-379 copy the shared relative position bias into every block;
# utils.py cosine_scheduler (warmup from 0, cosine to min_lr, both scaled by each group's lr_scale).
# Precision: unilm fine-tunes in fp16 with dynamic loss scaling (--enable_deepspeed: utils.py lines 667-672; without
# it, engine_for_finetuning.py's torch.cuda.amp autocast + NativeScaler); here beit_mm.AmpOptimWrapper dtype='auto':
# bf16 without loss scaling where the GPU has bf16, fp16 with dynamic loss scaling where it does not.
# The pretrained checkpoint (cls_pt_layers, lm_head and mask_token are dropped, the shared table copied per block):
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
# A beit_mm run of beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py loads instead with
#   model.backbone.init_cfg = dict(type='Pretrained', prefix='backbone.',
#       checkpoint='work_dirs/beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k/epoch_1600.pth')
_base_ = ['../_base_/datasets/imagenet_bs128_beit_ft.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

# --imagenet_default_mean_and_std (the pretraining's normalization), in BGR order for the pixel-space fill values
# (timm RandAugment pads with the mean colour; RandomErasing 'pixel' mode fills with N(0, 1) in normalized space)
bgr_mean = [103.53, 116.28, 123.675]
bgr_std = [57.375, 57.12, 58.395]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9,
         magnitude_std=0.5, hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=bgr_mean, fill_std=bgr_std),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

model = dict(
    type='ImageClassifier',
    # beit_mm's: mmpretrain's ClsDataPreprocessor + the RandAugment and erasing the train pipeline drew
    data_preprocessor=dict(type='beit_mm.AugmentClsDataPreprocessor', num_classes=1000,
                           mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(
        type='beit_mm.BEiT',
        arch='base',
        img_size=224,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=0.1,
        drop_path_rate=0.2,
        out_indices=(-1, ),
        final_norm=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(type='beit_mm.MeanPoolNeck', in_channels=768),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        # unilm: trunc_normal_(std=0.02) then weight *= init_scale 0.001 -> std 2e-5; bias 0
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02 * 0.001, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

base_lr = 5e-4  # for 1024 images per step
min_lr = 1e-6
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # unilm get_parameter_groups with skip_list no_weight_decay() = ('cls_token', 'pos_embed'): the 'unilm' rule
    paramwise_cfg=dict(layer_decay_rate=0.6, weight_decay_rule='unilm'))
warmup_epochs = 20
max_epochs = 100
param_scheduler = [
    # unilm warms up from 0 (np.linspace(0, lr, W)); 1e-9 stands for 0 (MMEngine's LinearLR divides by start_factor)
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs, convert_to_iter_based=True),
    # eta_min_ratio keeps the layer-decay ratios (unilm scales min_lr by each group's lr_scale too)
    dict(type='CosineAnnealingLR', eta_min_ratio=min_lr / base_lr, by_epoch=True, begin=warmup_epochs,
         end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(enable=False, base_batch_size=1024)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2, save_best='auto'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False))
# Warn at start when processes x batch x accumulation differs from auto_scale_lr.base_batch_size.
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook')]
env_cfg = dict(cudnn_benchmark=True, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))  # tools/train.py uses gloo without CUDA
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
# unilm beit2/run_class_finetuning.py line 260: seed = args.seed (0) + utils.get_rank(): every process draws its own Mixup/CutMix
# choice and lambda, drop-path masks and augmentations; line 265: cudnn.benchmark = True.
randomness = dict(seed=0, diff_rank_seed=True)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
