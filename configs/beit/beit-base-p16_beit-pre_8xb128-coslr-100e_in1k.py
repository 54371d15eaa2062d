# ImageNet-1k fine-tuning of BEiT-B/16 from a beit_mm masked-image-modeling checkpoint, 100 epochs, 8 GPUs x 128 =
# 1024 images/step (BEiT paper / unilm beit/README: 83.2 top-1 after 800 epochs of MIM on ImageNet-1k).
# Recipe: AdamW lr 4e-3, wd 0.05, layer decay 0.65, warmup 20 epochs, cosine to 1e-6, drop path 0.1, mean pooling +
# fc_norm, head init scale 0.001, mixup 0.8 / cutmix 1.0, RandAugment rand-m9-mstd0.5-inc1, label smoothing 0.1,
# random erasing 0.25. The checkpoint's shared relative position bias is copied into every block on load.
# Reference: unilm beit/get_started_for_image_classification.md (BEiT-base: 8 GPUs x 128, --lr 4e-3 --warmup_epochs
# 20 --epochs 100 --layer_decay 0.65 --drop_path 0.1 --weight_decay 0.05); run_class_finetuning.py lines 465-499
# (LayerDecayValueAssigner, skip_weight_decay_list = model.no_weight_decay() = {pos_embed, cls_token};
# get_parameter_groups line 65: also no weight decay on 1-D parameters and biases; relative position tables decay
# without --disable_weight_decay_on_rel_pos_bias); utils.py cosine_scheduler (warmup from 0, cosine to --min_lr 1e-6,
# both scaled by each group's lr_scale). Normalization: the MIM run's (pretraining config, ImageNet mean/std).
# Precision: mixed, as unilm (get_started_for_image_classification.md line 69: --enable_deepspeed, i.e. utils.py
# lines 581-586: DeepSpeed fp16 with dynamic loss scaling; without it engine_for_finetuning.py line 78: torch.cuda.amp
# autocast with NativeScaler, run_class_finetuning.py line 500): beit_mm.AmpOptimWrapper dtype='auto', bf16 where the
# GPU has it, fp16 with dynamic loss scaling where it does not.
_base_ = ['../_base_/datasets/imagenet_bs128_beit_ft.py']
mim_checkpoint = 'work_dirs/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k/epoch_800.pth'

custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='ImageClassifier',
    # the pretraining config's mean/std (beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py, --imagenet_default_mean_and_std)
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
        drop_path_rate=0.1,
        out_indices=(-1, ),
        final_norm=False,
        init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')),
    neck=dict(type='beit_mm.MeanPoolNeck', in_channels=768),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        # unilm: trunc_normal_(std=0.02) then weight *= init_scale 0.001 -> std 2e-5; bias 0
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02 * 0.001, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

base_lr = 4e-3  # for 1024 images per step
min_lr = 1e-6
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # unilm get_parameter_groups with skip_list no_weight_decay() = ('cls_token', 'pos_embed'): the 'unilm' rule
    paramwise_cfg=dict(layer_decay_rate=0.65, weight_decay_rule='unilm'))
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
# unilm beit/run_class_finetuning.py line 228: seed = args.seed (0) + utils.get_rank(): every process draws its own Mixup/CutMix
# choice and lambda, drop-path masks and augmentations; line 233: cudnn.benchmark = True.
randomness = dict(seed=0, diff_rank_seed=True)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
