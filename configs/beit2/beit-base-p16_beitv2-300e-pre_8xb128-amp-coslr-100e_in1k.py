# ImageNet-1k fine-tuning of BEiT v2 BEiT-B/16 from its 300-epoch VQ-KD pretraining (the short schedule,
# beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py), 100 epochs, 8 GPUs x 128 = 1024 images/step, mixed precision.
# Published: 85.0 top-1 (unilm beit2/get_started_for_image_classification.md line 9, beitv2_base_patch16_224_pt1k_300e
# -> beitv2_base_patch16_224_pt1k_300e_ft1k).
# Reference: unilm beit2/get_started_for_image_classification.md "--layer_decay: ... 0.65 for 300 epochs" (line 52),
# "--drop_path: ... 0.1 for 300 epochs" (line 53); everything else as the 1600-epoch recipe (the base config: lr 5e-4,
# 100 epochs, warmup 20, mixup 0.8, cutmix 1.0, lines 30-51).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k_300e.pth \
#       checkpoints/beitv2-base_pt1k-300e.pth
_base_ = ['./beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py']
pretrained = 'checkpoints/beitv2-base_pt1k-300e.pth'
model = dict(backbone=dict(drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
optim_wrapper = dict(paramwise_cfg=dict(layer_decay_rate=0.65))
