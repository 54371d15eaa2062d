# BEiT v2's VQ-KD tokenizer unilm `vqkd_encoder_base_decoder_3x768x12_clip`, distilled from CLIP ViT-B/16 on
# ImageNet-1k, 8 GPUs x 64, 100 epochs, bf16 transformers. Published: none (codebook usage in beit2/TOKENIZER.md).
# Source: microsoft/unilm@768a3c87 beit2/TOKENIZER.md and run_vqkd_training.py. The teacher is OpenAI's ViT-B-16.pt or a
# Hugging Face CLIPVisionModelWithProjection folder:
#   bash tools/dist_train.sh configs/vqkd/vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py 8 \
#       --cfg-options model.teacher.checkpoint=/path/to/ViT-B-16.pt
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

arch = 'base_decoder_3x_clip'
clip_checkpoint = 'checkpoints/clip/ViT-B-16.pt'
teacher = dict(type='beit_mm.CLIPTeacher', image_size=224, patch_size=16, width=768, layers=12, heads=12,
               output_dim=512, checkpoint=clip_checkpoint)
data_root = 'data/imagenet'
img_size = 224
batch_size = 64
max_epochs = 100
warmup_epochs = 10
base_lr = 5e-5 * 64 * 8 / 128

model = dict(type='beit_mm.VQKD', arch=arch, teacher=teacher, decay=0.99, beta=1.0, kmeans_init=True,
             dead_code_ratio=0.0, autocast_dtype='bfloat16')

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, crop_ratio_range=(0.08, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=batch_size,
    num_workers=10,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='train', with_label=False,
                 pipeline=train_pipeline))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-4),
    paramwise_cfg=dict(flat_decay_mult=0.0, bias_decay_mult=0.0,
                       custom_keys={'cls_token': dict(decay_mult=0.0), 'pos_embed': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
auto_scale_lr = dict(enable=False, base_batch_size=512)
custom_hooks = [
    dict(type='beit_mm.TokenizerEvalHook', folder='data/imagenet/val', img_size=img_size, num_images=1000,
         interval=5000),
]

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=20, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'))
log_processor = dict(by_epoch=True)
env_cfg = dict(cudnn_benchmark=True, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
compile = dict(scope='model', devices=['cuda'])
