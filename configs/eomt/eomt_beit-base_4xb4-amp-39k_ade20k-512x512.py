# EoMT (encoder-only mask transformer, Kerssies et al. CVPR 2025, arXiv 2503.19108) on BEiT-B, ADE20K semantic
# segmentation 512x512, 4 GPUs x 4 images (16), 39153 iterations (31 epochs), mixed precision, from the
# self-supervised (MIM, pretrained-only) ImageNet-22k checkpoint unilm beit_base_patch16_224_pt22k, as
# configs/beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py: the shared relative position bias is copied into every
# block and resampled from 14x14 to 32x32 on load, and the file's final norm is the norm EoMT predicts from.
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones; no BEiT + EoMT number was found.
#
# Official values, github.com/tue-mps/eomt @ 7bd19dd (path:line):
# - schedule: 31 epochs (configs/dinov2/ade20k/semantic/eomt_large_512.yaml:2) of floor(20210 / 16) = 1263 steps
#   (ADE20K's 20210 training images, drop_last=True at datasets/ade20k_semantic.py:94, total batch 16 at
#   README.md:131) = 39153 iterations; validation every epoch (Lightning's default, no val interval in the config);
# - batch: 4 GPUs x 4 images (README.md:124-131: "devices x batch_size = 16"); seed 0 (main.py:167);
# - optimizer: AdamW (training/lightning_module.py:152; torch defaults betas (0.9, 0.999), eps 1e-8), lr 1e-4,
#   weight decay 0.05 on every parameter (training/mask_classification_semantic.py:25,29; lightning_module.py:152),
#   layer-wise lr decay 0.8 with llrd_l2_enabled True (mask_classification_semantic.py:26-27; the rule
#   lightning_module.py:102-149: beit_mm.EoMTLayerDecayOptimWrapperConstructor); gradient clipping at norm 0.01
#   (main.py:176-177);
# - lr schedule: two-stage warmup (heads 500 steps, then the backbone 1000 steps, held at 0 before) and poly 0.9 to 0
#   at the last step (mask_classification_semantic.py:33-34; training/two_stage_warmup_poly_schedule.py:26-49:
#   beit_mm.TwoStageWarmupPolyLR);
# - model: 100 queries (eomt_large_512.yaml:18); L2 = 3 blocks with queries for ViT-B (the official ViT-B config,
#   configs/dinov2/coco/panoptic/eomt_base_640.yaml:19; the ADE20K semantic config is ViT-L only, with the default
#   L2 = 4, models/eomt.py:24); masked attention on (models/eomt.py:25); no drop path (the blocks' parts are called
#   directly, models/eomt.py:185-195; timm's default drop_path_rate 0);
# - mask annealing, poly 0.9 (lightning_module.py:199-209): the ADE20K unit U = 6520 steps (eomt_large_512.yaml:13-14,
#   block j of 4 anneals from (j + 1) U to (j + 2) U) laid out for 3 blocks as the official ViT-B config does
#   (eomt_base_640.yaml:13-14: starts U, 2.5 U, 4 U, each over U, the last ending at 5 U):
#   starts 6520, 16300, 26080; ends 13040, 22820, 32600;
# - loss: class 2.0, mask 5.0, dice 5.0, no-object 0.1, 12544 points, oversample 3.0, importance 0.75
#   (mask_classification_semantic.py:30-38), on every prediction (lightning_module.py:181-194);
# - data (datasets/transforms.py, ade20k_semantic.py:23-27): crop 512, scale jitter 0.5-2.0 of the image fitted into
#   512x512 (torchvision ScaleJitter = mmseg RandomResize of scale (512, 512) with keep_ratio), pad, random crop 512,
#   horizontal flip 0.5, colour jitter (brightness 32/255, contrast 0.5, saturation 0.5, hue 18/360, transforms.py:
#   23-26,44-82); labels 1..150 -> 0..149, 0 ignored (ade20k_semantic.py:15; reduce_zero_label);
# - test: the shorter side resized to 512 (PIL bilinear), ceil(long / 512) windows of 512 along the longer side, their
#   per-pixel scores averaged and resized to the image (lightning_module.py:601-665; mask_classification_semantic.py:
#   92-105), scores = sum_q softmax(class)[:150] x sigmoid(mask) (lightning_module.py:668-675); mIoU over 150 classes.
#
# Differences from the official runs (which use a DINOv2 ViT with 4 register tokens, patch 14 at 512 -> 16 px here):
# - backbone: BEiT-B (patch 16, relative position bias per block, layer scale, no registers, no absolute position
#   embedding); the queries take the cls token's rows of the relative position bias (beit_mm/models/segmentors/
#   eomt.py); images normalized with ImageNet mean/std as the official ViT (models/vit.py:41-44) and unilm's BEiT
#   ADE20K recipes;
# - precision: mixed as the official ("16-mixed", main.py:169: fp16 autocast with a GradScaler): dtype='auto' trains
#   in bf16 without loss scaling where the GPU has bf16 and in fp16 with dynamic loss scaling where it does not;
#   main.py:88's torch.set_float32_matmul_precision('medium') (TF32 for fp32 matmuls) is not set here; compiled as
#   the official (main.py:154-155, torch.compile(model) unless --compile_disabled): the prediction network, on CUDA
#   (below);
# - colour jitter: mmseg's PhotoMetricDistortion, same probabilities and ranges, but brightness is +-32 added, not a
#   factor 1 +- 32/255, contrast scales pixels rather than blending with the mean grey, saturation is HSV's S; hue 9
#   OpenCV units = 18 degrees as the official 18/360 turns;
# - no re-draw of a crop without any labelled pixel (transforms.py:112-114); padding holds the mean colour (0 after
#   normalization) instead of black; test resize caps the longer side at 2048 (only images wider than 4:1 differ);
#   windows start every 512 px with the last one flush with the border (mmseg slide), the official spaces them evenly:
#   the same windows for images up to 2:1 (two windows), shifted ones beyond.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth \
#       checkpoints/beit-base_pt22k.pth
_base_ = [
    '../_base_/models/eomt_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beit-base_pt22k.pth'
model = dict(
    data_preprocessor=dict(
        type='beit_mm.PhotoMetricSegDataPreProcessor',  # mmseg's, + the distortion a train pipeline leaves to it
        mean=[123.675, 116.28, 103.53],  # ImageNet mean/std (official models/vit.py:41-44)
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255,
        size=crop_size,
        test_cfg=None),  # no test-time padding: every window is a full 512x512 crop of the resized image
    backbone=dict(
        arch='base',
        img_size=512,
        patch_size=16,
        use_shared_rel_pos_bias=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=3,
    mask_annealing=dict(start_steps=[6520, 16300, 26080], end_steps=[13040, 22820, 32600], poly_power=0.9),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=crop_size))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True, backend='pillow'),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5),
         hue_delta=9),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline  # this config trains with mmseg's transforms: the exact pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, dataset=dict(pipeline=train_pipeline))  # x 4 GPUs = 16
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 1e-4
max_iters = 39153  # 31 epochs x 1263 steps
iters_per_epoch = 1263
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    constructor='beit_mm.EoMTLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8, llrd_l2_enabled=True))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(500, 1000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=iters_per_epoch)
default_hooks = dict(checkpoint=dict(interval=iters_per_epoch, save_best=None))
custom_hooks = [  # default_runtime's, and the annealing step
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),  # the annealing step; EoMT refuses to train without it
]
randomness = dict(seed=0)
# cuDNN as the official run leaves it: main.py:168-178 passes no `benchmark` to Lightning's Trainer (lightning 2.5.1,
# requirements.txt:6), which then keeps torch's default cudnn.benchmark = False (not default_runtime.py's True).
env_cfg = dict(cudnn_benchmark=False)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
