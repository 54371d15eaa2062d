# CvT-21 on ImageNet-1k from scratch, 224x224, 8 GPUs x 128 images = total batch 1024, lr 1e-3 (1.25e-4 per GPU, as
# the official code scales it), 300 epochs; paper: 82.5 top-1. CvT-21's own recipe, which is not CvT-13's:
# microsoft/CvT experiments/imagenet/cvt/cvt-21-224x224.yaml (values pinned with their lines in
# tests/configs/reference_recipes.py):
# - DEPTH [1, 4, 16], DROP_PATH_RATE [0, 0, 0.1] (per stage, linear inside each stage);
# - TRAIN.BATCH_SIZE_PER_GPU 128, TRAIN.LR 0.000125 x 8 GPUs (lib/config/default.py: LR *= world_size), WD 0.1
#   (none on norms, biases, cls_token), warmup 5 epochs from 1e-6, cosine to 1e-5;
# - DATASET.SAMPLER repeated_aug (lib/dataset/samplers/ra_sampler.py: every image 3 times per epoch, each copy on
#   another GPU, len(dataset) // 256 * 256 / world_size images per GPU): mmpretrain's RepeatAugSampler(num_repeats=3)
#   (ceil(len(dataset) / world_size) images per GPU: 18 more per GPU for ImageNet, the same 1251 steps per epoch);
# - AUG.TIMM_AUG.USE_LOADER false: the plain torchvision pipeline of lib/dataset/transformas/build.py (lines 76-100):
#   RandomResizedCrop 224 (scale 0.08-1, AUG.INTERPOLATION 2 = bilinear), h-flip, no colour jitter (AUG.COLOR_JITTER
#   probability 0), no RandAugment, no random erasing; mixup 0.8 / cutmix 1.0 and label smoothing 0.1 as CvT-13;
#   the train loader drops the last incomplete batch (lib/dataset/build.py line 112);
# - test: short side 256 (224 / 0.875) bicubic, centre crop 224 (TEST.CENTER_CROP, TEST.INTERPOLATION 3).
# - mixed precision (lines 4-5: AMP.ENABLED true) and cudnn.benchmark (line 49): as CvT-13, from its config.
# Differences to the official run: per-iteration warmup/cosine (official: per epoch, timm scheduler).
_base_ = ['./cvt-13_8xb256-300e_in1k.py']
model = dict(backbone=dict(arch='cvt-21', drop_path_rate=(0.0, 0.0, 0.1)))
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, crop_ratio_range=(0.08, 1.0), aspect_ratio_range=(3. / 4., 4. / 3.),
         backend='pillow', interpolation='bilinear'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
# the same draws (the crop's and the flip's), decoded at the smallest JPEG scale that covers the crop
# (beit_mm/data/draft_transforms.py)
train_pipeline_gpu_decode = None  # not CvT-13's (the base's): a bilinear crop has no device resize
train_pipeline = [
    dict(type='beit_mm.DecodeRandomResizedCrop', scale=224, crop_ratio_range=(0.08, 1.0),
         aspect_ratio_range=(3. / 4., 4. / 3.), interpolation='bilinear', flip_prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,  # x 8 GPUs = 1024
    drop_last=True,
    sampler=dict(_delete_=True, type='RepeatAugSampler', num_repeats=3, shuffle=True),
    dataset=dict(pipeline=train_pipeline))
base_lr = 1.25e-4 * 8
optim_wrapper = dict(optimizer=dict(lr=base_lr, weight_decay=0.1))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / base_lr, by_epoch=True, begin=0, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5, end=300, convert_to_iter_based=True),
]
auto_scale_lr = dict(base_batch_size=1024)
