# CvT-W24 fine-tuned on ImageNet-1k at 384x384 from the ImageNet-22k checkpoint, 8 GPUs x 64, 20k iterations, AMP.
# Published: 87.6 top-1 (CvT paper, released IN-22k CvT-W24 at 384). The recipe is the paper's section 4 (ViT's
# fine-tuning: SGD, no weight decay, clip 1, cosine); lr 0.01 is this config's choice.
# Source: microsoft/CvT@f851e681 experiments/imagenet/cvt/cvt-w24-384x384.yaml (drop path, test resize).
#   python tools/convert_checkpoint.py --model cvt --source official CvT-w24-224x224-IN-22k.pth \
#       checkpoints/cvt-w24_in22k.pth
_base_ = ['./cvt-13_8xb256-300e_in1k.py']
pretrained = 'checkpoints/cvt-w24_in22k.pth'
img_size = 384
model = dict(
    backbone=dict(arch='cvt-w24', drop_path_rate=(0.0, 0.0, 0.3), init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    head=dict(in_channels=1024),
    train_cfg=dict(_delete_=True))
train_pipeline_exact = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_pipeline_gpu_decode = None
train_pipeline = [
    dict(type='beit_mm.DecodeRandomResizedCrop', scale=img_size, interpolation='bicubic', flip_prob=0.5),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(img_size, img_size), backend='pillow', interpolation='bicubic'),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=64, dataset=dict(pipeline=train_pipeline), sampler=dict(type='InfiniteSampler'))
val_dataloader = dict(batch_size=32, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

base_lr = 0.01
max_iters = 20000
warmup_iters = 500
optim_wrapper = dict(
    _delete_=True,
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='SGD', lr=base_lr, momentum=0.9, weight_decay=0.0),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=0.0, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters, val_interval=2000)
auto_scale_lr = dict(enable=False, base_batch_size=512)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2000, max_keep_ckpts=3,
                    save_best='accuracy/top1', rule='greater'))
log_processor = dict(by_epoch=False)
