# BEiT v2 BEiT-B/16 fine-tuned on ImageNet-1k from its 1600-epoch VQ-KD pretraining, 100 epochs, 8 GPUs x 128, AMP.
# Published: 85.5 top-1 (unilm beit2/README.md, beitv2_base_patch16_224_pt1k_ft1k).
# Source: microsoft/unilm@768a3c87 beit2/get_started_for_image_classification.md and run_class_finetuning.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
# A beit_mm run of beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py loads instead with
#   model.backbone.init_cfg = dict(type='Pretrained', prefix='backbone.',
#       checkpoint='work_dirs/beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k/epoch_1600.pth')
_base_ = ['../_base_/datasets/imagenet_bs128_beit_ft.py']
pretrained = 'checkpoints/beitv2-base_pt1k.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

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
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02 * 0.001, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

base_lr = 5e-4
min_lr = 1e-6
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.6, weight_decay_rule='unilm'))
warmup_epochs = 20
max_epochs = 100
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs, convert_to_iter_based=True),
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
