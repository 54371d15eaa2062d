# BEiT v2's VQ-KD tokenizer, unilm's `vqkd_encoder_base_decoder_3x768x12_clip` (ViT-B/16 encoder, 3-block decoder,
# 8192 codes x 32) distilled from CLIP ViT-B/16 on ImageNet-1k train images, the recipe of unilm beit2/TOKENIZER.md
# (8 GPUs x 64 images, 100 epochs, 10 warmup epochs, AdamW betas (0.9, 0.99), weight decay 1e-4, bicubic
# RandomResizedCrop 224 with min scale 0.08, k-means codebook init, cosine loss) and run_vqkd_training.py's defaults
# for what TOKENIZER.md leaves out (lr 5e-5 per 128 images -> 2e-4 at 512, warmup from 0, cosine to 1e-5, eps
# 1e-8, no gradient clipping, no colour jitter, drop_last; no weight decay on 1-D parameters, biases, cls_token,
# pos_embed).
# Mixed precision: unilm autocasts to fp16 (V100); here the two transformers run in bf16 (model.autocast_dtype), the
# task layers, quantizer, loss and the CLIP teacher in fp32.
#   bash tools/dist_train.sh configs/vqkd/vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py 8 \
#       --cfg-options model.teacher.checkpoint=/path/to/ViT-B-16.pt
# (OpenAI's file, or a Hugging Face CLIPVisionModelWithProjection folder)
# The trained file is a tokenizer as is: dict(type='VQKD', init_cfg=dict(type='Pretrained', checkpoint=...)).
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmpretrain'

arch = 'base_decoder_3x_clip'
clip_checkpoint = 'checkpoints/clip/ViT-B-16.pt'
teacher = dict(type='beit_mm.CLIPTeacher', image_size=224, patch_size=16, width=768, layers=12, heads=12,
               output_dim=512, checkpoint=clip_checkpoint)
data_root = 'data/imagenet'
img_size = 224
batch_size = 64  # per GPU; 8 GPUs
max_epochs = 100
warmup_epochs = 10
base_lr = 5e-5 * 64 * 8 / 128  # run_vqkd_training.py: args.lr = total_batch_size / 128 * args.lr

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
    drop_last=True,  # run_vqkd_training.py line 222: 2502 steps per epoch at 512, not 2503
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='train', with_label=False,
                 pipeline=train_pipeline))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-4),
    # unilm optim_factory.get_parameter_groups: no decay for 1-D parameters, biases and VQKD.no_weight_decay()
    paramwise_cfg=dict(flat_decay_mult=0.0, bias_decay_mult=0.0,
                       custom_keys={'cls_token': dict(decay_mult=0.0), 'pos_embed': dict(decay_mult=0.0)}))
# utils.cosine_scheduler (lines 530-547), called without start_warmup_value (run_vqkd_training.py lines 268-271): linear
# from 0 to lr over the warmup epochs, then cosine to min_lr 1e-5, per step (--warmup_lr 1e-6 is parsed but never
# used); 1e-9 stands for 0 (MMEngine's LinearLR needs start_factor > 0)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
auto_scale_lr = dict(enable=False, base_batch_size=512)
custom_hooks = [
    # held-out usage / perplexity / dead codes / teacher cosine (unilm evaluates codebook usage on the val set)
    dict(type='beit_mm.TokenizerEvalHook', folder='data/imagenet/val', img_size=img_size, num_images=1000,
         interval=5000),
]

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=20, max_keep_ckpts=3),  # --save_ckpt_freq 20
    sampler_seed=dict(type='DistSamplerSeedHook'))
log_processor = dict(by_epoch=True)
# cudnn.benchmark = True: unilm beit2/run_vqkd_training.py line 177
env_cfg = dict(cudnn_benchmark=True, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
