# ImageNet-1k fine-tuning of BEiT v2 BEiT-L/16 from its 1600-epoch VQ-KD pretraining, 50 epochs, 1024 images/step
# (8 GPUs x 128 here; unilm 8 GPUs x 64 x --update_freq 2), AMP. Published: 87.3 top-1 (unilm beit2/README.md
# and get_started_for_image_classification.md line 13, beitv2_large_patch16_224_pt1k ->
# beitv2_large_patch16_224_pt1k_ft1k).
# Reference: unilm beit2/get_started_for_image_classification.md "Fine-tuning ... large" (lines 57-91): --weight_decay
# 0.05, --batch_size 64 --update_freq 2 on 8 GPUs, --warmup_epochs 5, --imagenet_default_mean_and_std; for pretrained
# (not intermediate fine-tuned) models "--lr 2e-4 for 1600 epochs pretrained model", "--epochs 50", "--mixup 0.8",
# "--cutmix 1.0", "--layer_decay 0.8 for all models", "--drop_path 0.2 for pretrained models"; the rest as the base
# recipe (run_class_finetuning.py defaults: --min_lr 1e-6, --smoothing 0.1, RandAugment, --reprob 0.25, --init_scale
# 0.001, mean pooling; layer decay over 24 blocks).
# Memory: 128 BEiT-L images per GPU may need model.backbone.with_cp=True, or 16 GPUs x 64 (keep processes x batch =
# 1024: tools/train.py warns otherwise).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k.pth \
#       checkpoints/beitv2-large_pt1k.pth
_base_ = ['./beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py']
pretrained = 'checkpoints/beitv2-large_pt1k.pth'
model = dict(
    backbone=dict(arch='large', drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=1024),
    head=dict(in_channels=1024))
base_lr = 2e-4  # for 1024 images per step
min_lr = 1e-6
optim_wrapper = dict(optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=0.8))
warmup_epochs = 5
max_epochs = 50
param_scheduler = [  # unilm cosine_scheduler with these epochs (see the base config)
    dict(type='LinearLR', start_factor=1e-9, by_epoch=True, begin=0, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min_ratio=min_lr / base_lr, by_epoch=True, begin=warmup_epochs,
         end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
