# CvT-21 on ImageNet-1k from scratch, 224x224, 8 GPUs x 128 images, 300 epochs. Published: 82.5 top-1 (CvT paper).
# Source: microsoft/CvT@f851e681 experiments/imagenet/cvt/cvt-21-224x224.yaml (its own recipe: repeated augmentation, no
# RandAugment); warmup and cosine step per iteration.
_base_ = ['./cvt-13_8xb256-300e_in1k.py']
model = dict(backbone=dict(arch='cvt-21', drop_path_rate=(0.0, 0.0, 0.1)))
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, crop_ratio_range=(0.08, 1.0), aspect_ratio_range=(3. / 4., 4. / 3.),
         backend='pillow', interpolation='bilinear'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_pipeline_gpu_decode = None
train_pipeline = [
    dict(type='beit_mm.DecodeRandomResizedCrop', scale=224, crop_ratio_range=(0.08, 1.0),
         aspect_ratio_range=(3. / 4., 4. / 3.), interpolation='bilinear', flip_prob=0.5),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
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
